//! The affine engine (DESIGN.md item 6). TODO(issue 6): being written.
