//! Binding `main`'s returned values to its declared outputs: each output tensor gets the declared
//! name (renaming the node that produced it), its declared type is recorded for the check after
//! inference, and an input or a value returned a second time is copied under the output's name (a
//! `Reshape` to its own shape).

use super::{err, Builder, Expect, Frame, Val, R};
use crate::diag::codes;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;

impl<'p> Builder<'p> {
    /// Binds `main`'s returned values to its declared outputs.
    pub(super) fn bind_outputs(&mut self, frame: &Frame, values: &[Val]) -> R<()> {
        let def = frame.def;
        let mut claimed: BTreeSet<String> = BTreeSet::new();
        for (o, v) in def.outputs.iter().zip(values) {
            let shape = self.param_shape(frame, o)?;
            let Val::Tensor(t) = v else {
                return err(
                    codes::SCALAR_ONLY_EXPRESSION,
                    self.file,
                    o.name.pos,
                    format!("output `{}` of `main` is a scalar literal", o.name.name),
                    "return a tensor",
                );
            };
            let name = &o.name.name;
            let is_input = def.params.iter().any(|p| &p.name.name == t);
            if def.params.iter().any(|p| &p.name.name == name) {
                if t != name {
                    return err(
                        codes::DUPLICATE_DEFINITION,
                        self.file,
                        o.name.pos,
                        format!("output `{name}` has an input's name but is not that input"),
                        "rename the output",
                    );
                }
                // The input itself is the output.
                claimed.insert(name.clone());
                self.outputs.push(json!({"tensor": name}));
                continue;
            }
            if is_input || claimed.contains(t) {
                // An input or an already bound value: copy it with an identity reshape.
                if self.used.contains(name) {
                    let other = self.fresh(name);
                    self.rename(name, &other);
                }
                self.used.insert(name.clone());
                self.expects.push(Expect {
                    tensor: t.clone(),
                    dtype: o.dtype,
                    shape: shape.clone(),
                    origin: self.origin(frame, o.name.pos),
                    what: format!("output `{name}` of graph `main`"),
                });
                let mut attrs = Map::new();
                attrs.insert("shape".into(), json!(shape));
                let mut node = Map::new();
                node.insert("op".into(), json!("Reshape"));
                node.insert("name".into(), json!(name));
                node.insert("inputs".into(), json!([t]));
                node.insert("outputs".into(), json!([name]));
                node.insert("attrs".into(), Value::Object(attrs));
                self.nodes.push(node);
                self.origins
                    .insert(name.clone(), self.origin(frame, o.name.pos));
            } else if t != name {
                if self.used.contains(name) {
                    let other = self.fresh(name);
                    self.rename(name, &other);
                }
                self.rename(t, name);
                self.used.insert(name.clone());
            }
            claimed.insert(name.clone());
            self.outputs.push(json!({"tensor": name}));
            self.declare(name, o.dtype, &shape);
            let at = self.origin(frame, o.name.pos);
            self.origins.entry(name.clone()).or_insert(at);
        }
        Ok(())
    }

    /// Renames a tensor (and its node) everywhere.
    fn rename(&mut self, from: &str, to: &str) {
        let swap = |v: &mut Value| {
            if v.as_str() == Some(from) {
                *v = json!(to);
            }
        };
        for n in &mut self.nodes {
            for key in ["name"] {
                if let Some(v) = n.get_mut(key) {
                    swap(v);
                }
            }
            for key in ["inputs", "outputs"] {
                if let Some(Value::Array(a)) = n.get_mut(key) {
                    a.iter_mut().for_each(swap);
                }
            }
        }
        for e in &mut self.expects {
            if e.tensor == from {
                e.tensor = to.to_string();
            }
        }
        if let Some(o) = self.origins.remove(from) {
            self.origins.insert(to.to_string(), o);
        }
        self.used.remove(from);
        self.used.insert(to.to_string());
    }
}
