//! The `dlc-egg` command-line tool: a thin front end over the `dlc_egg` library crate. The
//! command-line interface (argument parsing, wiring, diagnostics on stderr) lives in the binary's
//! private `cli` module; it is not part of the library's API.

mod cli;

/// With the `mimalloc` feature (off by default: `run --device cpu`'s timed kernels were slower
/// under it, see Cargo.toml), mimalloc instead of the system allocator: the optimizer allocates
/// and frees millions of small term, region and plan values (a third of `optimize`'s CPU time
/// went to glibc's `malloc`/`free` on a BERT export; bench/results/optimize-speed-2026-11-27.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let code = cli::main_with_args(std::env::args().collect());
    std::process::exit(code);
}
