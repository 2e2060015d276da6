//! Exit codes of `vmrepro` (documented in the README). A leaf module: the CLI picks
//! them, tests check them; library code returns typed errors and never exits.

/// Everything passed.
pub const SUCCESS: i32 = 0;
/// A step exited with an unexpected status, or a result check failed.
pub const TEST_FAILURE: i32 = 1;
/// The suite file, the images folder, a package index `images repin` read, or the
/// command line is invalid; nothing was booted (nor written).
pub const CONFIG_ERROR: i32 = 2;
/// Images, network or VMs failed (didn't boot, agent never answered, QEMU died).
pub const INFRASTRUCTURE: i32 = 3;
/// Interrupted by SIGINT, SIGTERM or SIGHUP (always 130 = 128 + SIGINT, what shells
/// report for Ctrl-C): VMs were shut down and `run.json` says `interrupted`.
pub const INTERRUPTED: i32 = 130;
