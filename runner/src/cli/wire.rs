//! `vmrepro wire RUN [VM]`: the RPC table and the longest waits of a run's captures.

use std::path::Path;

use crate::exit;
use crate::wire::{run_dir::run_captures, table::render};

/// Prints the wire summary of `vm`'s capture (or of every captured VM) in `run_dir`.
pub fn wire(run_dir: &Path, vm: Option<&str>) -> i32 {
    match run_captures(run_dir, vm) {
        Ok(vms) => {
            for v in vms {
                out!("{}", render(&v.vm, &v.summary, v.start_us));
            }
            exit::SUCCESS
        }
        Err(e) => {
            errln!("error: {e}");
            exit::CONFIG_ERROR
        }
    }
}
