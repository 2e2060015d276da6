//! The `vmrepro` binary: everything is in the library ([`vmrepro::cli`]).

fn main() {
    std::process::exit(vmrepro::cli::main());
}
