//! Built-in scenarios: presets that expand into ordinary steps and measurements, and
//! give the report what only they know through one interface ([`Preset`]).

pub mod nfs_read;
pub mod preset;

pub use preset::Preset;
