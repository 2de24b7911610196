//! Kernel extraction from the e-graph. Built on `ir`; takes rules and costs as parameters.
//! TODO(issue 4): cost model, schedule plans and DAG-aware extraction.
