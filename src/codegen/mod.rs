//! Plan → GPU dialect IR → CUDA C. Built on `ir` and `extract`, never on `rules`.
//! TODO(issue 5): CUDA code generation.
