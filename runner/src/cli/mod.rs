//! The `vmrepro` command line: argument parsing (`args.rs`), dispatch to the library and
//! exit codes (`dispatch.rs`), progress rendering and signals (`progress.rs`), and one
//! module per group of subcommands. `main.rs` only calls [`main`].

mod args;
mod bench;
mod bisect;
mod dispatch;
mod images;
mod interactive;
mod progress;
mod publish;
mod wire;

use clap::Parser;

pub use dispatch::exit_code;
pub use progress::{interrupted, progress_sink};

/// Runs the CLI; returns the process exit code.
pub fn main() -> i32 {
    let cli = args::Cli::parse();
    crate::infra::images::tree::set_cli_trees(cli.trees.clone());
    if matches!(cli.command, args::Command::Check { .. } | args::Command::Plan { .. }) {
        // These only print: a closed pipe (`vmrepro check … | head`) ends them at once,
        // as it does `cat` (the others go on and drop the output, see `out!`). Not for
        // the commands that talk to QEMU over sockets, where EPIPE must stay an error.
        let _ = unsafe {
            nix::sys::signal::signal(nix::sys::signal::Signal::SIGPIPE, nix::sys::signal::SigHandler::SigDfl)
        };
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let code = rt.block_on(dispatch::dispatch(cli));
    // Don't wait for blocking reads still parked on stdin (`vmrepro shell` after the
    // guest's shell ended): they can't finish until the next key press.
    rt.shutdown_background();
    code
}
