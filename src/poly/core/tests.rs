//! Unit tests of Poly Core.
