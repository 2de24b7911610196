fn main() {
    let code = dlc_egg::cli::main_with_args(std::env::args().collect());
    std::process::exit(code);
}
