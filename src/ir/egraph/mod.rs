//! Tiny IR in an egg e-graph (`DESIGN.md` item 3): the language ([`lang`]), its attribute leaves
//! ([`attr`]), the IndexBook analysis ([`book`]) and conversion from and to Tiny IR ([`convert`]).
//! Rules live in `crate::rules` and build on this module; see `docs/egraph-design.md`.

pub mod attr;
pub mod book;
pub mod convert;
pub mod kernel;
pub mod lang;

pub use attr::Attr;
pub use book::{Facts, IndexBook, TensorFacts, TensorGraph};
pub use convert::{add_program, extract_program};
pub use kernel::KernelBody;
pub use lang::TensorLang;
