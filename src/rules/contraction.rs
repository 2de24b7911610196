//! placeholder
use super::Rule;
pub const RULE_NAMES: [&str; 0] = [];
pub fn rules() -> Vec<Rule> {
    vec![]
}
