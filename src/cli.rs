//! The command-line interface (stub; being written). `main.rs` only parses arguments and calls this.

/// Runs the CLI with process arguments; returns the exit status.
pub fn main_with_args(args: Vec<String>) -> i32 {
    let _ = args;
    0
}
