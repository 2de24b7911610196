//! The `dlc-egg` command-line tool: a thin front end over the `dlc_egg` library crate. The
//! command-line interface (argument parsing, wiring, diagnostics on stderr) lives in the binary's
//! private `cli` module; it is not part of the library's API.

mod cli;

/// mimalloc for small blocks, the system allocator for large ones ([`dlc_egg::alloc`]; feature
/// `mimalloc`, on by default).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: dlc_egg::alloc::SplitAlloc = dlc_egg::alloc::SplitAlloc;

fn main() {
    let code = cli::main_with_args(std::env::args().collect());
    std::process::exit(code);
}
