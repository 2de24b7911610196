//! Poly-View (seed 001 §5). TODO(issue 6): being written.
