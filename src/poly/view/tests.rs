//! Unit tests of the Poly-View.
