//! Inlining a subgraph call: the call is checked (no keyword arguments, the depth limit, one
//! argument per input), the arguments are evaluated and their shapes inferred, the callee's shape
//! variables are bound by unification with them, and the callee's body is executed in a fresh
//! frame whose node names carry the call's prefix; its outputs must then have the declared types.

use super::{check_distinct_names, declare_vars, err, Builder, Expect, Frame, Val, R};
use crate::diag::codes;
use crate::diag::Diagnostics;
use crate::dsl::ast::*;
use crate::dsl::lex::Pos;
use crate::dsl::located::dsl_diag;
use crate::dsl::parse::dtype_name;
use crate::ir::dim::{fmt_shape, Dim};
use crate::ir::frontend::TensorInfo;
use std::collections::BTreeMap;

impl<'p> Builder<'p> {
    /// Inlines a call of subgraph `func`; returns its outputs, in declaration order.
    pub(super) fn call_graph(
        &mut self,
        frame: &mut Frame<'p>,
        func: &Ident,
        args: &[Expr],
        kwargs: &[KwArg],
    ) -> R<Vec<Val>> {
        let def = self.graphs[func.name.as_str()];
        self.check_call(frame, def, func, args, kwargs)?;
        let (vals, names) = self.tensor_args(frame, func, args)?;
        let infos = self.infer(&names)?;
        check_distinct_names(def, self.file)?;
        declare_vars(def, self.file)?;
        let mut vars: BTreeMap<String, Option<Dim>> = BTreeMap::new();
        for (p, (info, a)) in def.params.iter().zip(infos.iter().zip(args)) {
            self.bind_param(&mut vars, def, p, info, a.pos())?;
        }
        for v in &def.shape_vars {
            let entry = vars.entry(v.name.name.clone()).or_insert(None);
            if entry.is_none() {
                *entry = v.default.map(Dim::int);
            }
        }
        let mut stack = frame.stack.clone();
        stack.push(format!(
            "{}@{}:{}",
            func.name, func.pos.line, func.pos.column
        ));
        let mut sub = Frame {
            def,
            env: def
                .params
                .iter()
                .map(|p| p.name.name.clone())
                .zip(vals)
                .collect(),
            vars,
            prefix: format!("{}{}_", frame.prefix, func.name),
            stack,
            depth: frame.depth + 1,
        };
        let out = self.exec(&mut sub)?;
        self.expect_outputs(&sub, def, &out)?;
        Ok(out)
    }

    /// The checks before anything is evaluated: no keyword arguments, the depth limit
    /// (`E0707` with the call chain), one argument per declared input.
    fn check_call(
        &self,
        frame: &Frame<'p>,
        def: &GraphDef,
        func: &Ident,
        args: &[Expr],
        kwargs: &[KwArg],
    ) -> R<()> {
        if let Some(k) = kwargs.first() {
            return err(
                codes::INVALID_KEYWORD_ARGUMENT,
                self.file,
                k.name.pos,
                format!("graph `{}` takes no keyword arguments", func.name),
                "pass its inputs positionally",
            );
        }
        if frame.depth + 1 > self.max_depth {
            let mut chain: Vec<String> = frame.stack.clone();
            chain.push(format!(
                "{}@{}:{}",
                func.name, func.pos.line, func.pos.column
            ));
            return Err(Diagnostics::one(
                dsl_diag(
                    codes::RECURSION_TOO_DEEP,
                    self.file,
                    func.pos,
                    format!(
                        "calling `{}` here nests subgraph calls {} deep, beyond the maximum depth {} (endless recursion?)",
                        func.name,
                        frame.depth + 1,
                        self.max_depth
                    ),
                    "subgraphs are inlined, so recursion must end: remove the recursive call, or raise the limit with --max-depth N",
                )
                .with("call_chain", chain.join(" -> ")),
            ));
        }
        if args.len() != def.params.len() {
            return err(
                codes::ARITY_MISMATCH,
                self.file,
                func.pos,
                format!(
                    "graph `{}` takes {} input(s), found {}",
                    func.name,
                    def.params.len(),
                    args.len()
                ),
                "pass one argument per declared input",
            );
        }
        Ok(())
    }

    /// Evaluates the arguments of a call of `func`, which must all be tensors; returns the values
    /// and the tensor names.
    fn tensor_args(
        &mut self,
        frame: &mut Frame<'p>,
        func: &Ident,
        args: &[Expr],
    ) -> R<(Vec<Val>, Vec<String>)> {
        let mut vals = Vec::with_capacity(args.len());
        for a in args {
            vals.push(self.eval(frame, a, None)?);
        }
        let mut names = Vec::with_capacity(vals.len());
        for (v, a) in vals.iter().zip(args) {
            match v {
                Val::Tensor(t) => names.push(t.clone()),
                Val::Scalar(_) => {
                    return err(
                        codes::SCALAR_ONLY_EXPRESSION,
                        self.file,
                        a.pos(),
                        format!(
                            "a scalar literal is passed to graph `{}`, whose inputs are tensors",
                            func.name
                        ),
                        "pass a tensor",
                    )
                }
            }
        }
        Ok((vals, names))
    }

    /// Records the declared type of each output of the inlined call `sub` (checked once the
    /// whole document is inferred); a scalar literal returned as an output is an error.
    fn expect_outputs(&mut self, sub: &Frame<'p>, def: &GraphDef, out: &[Val]) -> R<()> {
        for (v, o) in out.iter().zip(&def.outputs) {
            let shape = self.param_shape(sub, o)?;
            let Val::Tensor(t) = v else {
                return err(
                    codes::SCALAR_ONLY_EXPRESSION,
                    self.file,
                    o.name.pos,
                    format!(
                        "graph `{}` returns a scalar literal as `{}`",
                        def.name.name, o.name.name
                    ),
                    "return a tensor",
                );
            };
            self.expects.push(Expect {
                tensor: t.clone(),
                dtype: o.dtype,
                shape,
                origin: self.origin(sub, o.name.pos),
                what: format!("output `{}` of graph `{}`", o.name.name, def.name.name),
            });
        }
        Ok(())
    }

    /// Binds the callee's shape variables from one argument's inferred type (unification).
    fn bind_param(
        &self,
        vars: &mut BTreeMap<String, Option<Dim>>,
        def: &GraphDef,
        p: &Param,
        info: &TensorInfo,
        at: Pos,
    ) -> R<()> {
        let declared = || {
            let dims: Vec<String> = p
                .shape
                .iter()
                .map(|d| match d {
                    DimExpr::Int(v) => v.to_string(),
                    DimExpr::Var(i) => i.name.clone(),
                })
                .collect();
            format!("{}[{}]", dtype_name(p.dtype), dims.join(", "))
        };
        let mismatch = |why: String| {
            err(
                codes::TYPE_MISMATCH,
                self.file,
                at,
                format!(
                    "input `{}` of graph `{}` is declared {}, but the argument is {}{}: {why}",
                    p.name.name,
                    def.name.name,
                    declared(),
                    dtype_name(info.dtype),
                    fmt_shape(&info.shape)
                ),
                "pass a tensor of the declared type (cast, reshape or expand it first)",
            )
        };
        if info.dtype != p.dtype {
            return mismatch("the dtypes differ".into());
        }
        if info.shape.len() != p.shape.len() {
            return mismatch("the ranks differ".into());
        }
        for (d, actual) in p.shape.iter().zip(&info.shape) {
            match d {
                DimExpr::Int(v) if !actual.is_int(*v) => {
                    return mismatch(format!("size {actual} is not {v}"))
                }
                DimExpr::Int(_) => {}
                DimExpr::Var(id) => match vars.get(&id.name) {
                    Some(Some(b)) if b != actual => {
                        return mismatch(format!("`{}` would be both {b} and {actual}", id.name))
                    }
                    Some(Some(_)) => {}
                    _ => {
                        vars.insert(id.name.clone(), Some(actual.clone()));
                    }
                },
            }
        }
        Ok(())
    }

    /// Dtypes and shapes of tensors built so far (inferring the partial graph when needed).
    pub(super) fn infer(&mut self, names: &[String]) -> R<Vec<TensorInfo>> {
        if names.iter().any(|n| !self.known.contains_key(n)) {
            let doc = self.document(&[]);
            let g = self.load(&doc)?;
            self.known.extend(g.tensors);
        }
        Ok(names
            .iter()
            .filter_map(|n| self.known.get(n).cloned())
            .collect())
    }
}
