//! Built-in scenarios: presets that expand into ordinary steps and measurements.

pub mod nfs_read;
