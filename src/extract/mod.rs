//! Kernel extraction from the e-graph. Built on `ir`; takes rules and costs as parameters.
//!
//! Landed: [`serialize`], interchange with the public `egraph-serialize` format; [`dag`], the
//! DAG-aware extractors (a fast greedy one and an exact ILP one behind one trait) over any
//! e-graph in that format; [`kernels`], kernel nodes and their own costs; [`cover`], the
//! optimizer's kernel cover chosen by a DAG-aware extractor; [`pricing`], the kernel pricing
//! hook ([`pricing::KernelPricer`], built-in [`pricing::Roofline`]); [`derived`], kernels over
//! constants computed once when the weights are bound (issue 23).

pub mod cover;
pub mod dag;
pub mod derived;
pub mod kernels;
mod own_cost;
pub mod pair_check;
pub mod pricing;
pub mod serialize;
