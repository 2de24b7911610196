//! Rewrite rules, one file per theme (movement, srnf, contraction, fusion). Built on `ir` only.
//! TODO(issue 3): the e-graph language and rule sets land with the e-graph core issue.
