//! Plan → GPU dialect IR → CUDA C. Built on `ir` and `extract`, never on `rules`.

pub mod manifest;
