fn main() {
    std::process::exit(vmrepro::cli::main());
}
