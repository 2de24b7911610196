//! Generated benchmark graphs in graph.json form. [`transformer_encoder`] is the BERT-style encoder
//! the e-graph and extraction benchmarks use (issues 3 and 4): hidden 768, 12 heads, MLP 3072,
//! symbolic sequence length `S`, fp16 with fp32 accumulation, post-LayerNorm residual blocks.
//!
//! Not part of the library: the benches (`bench/*.rs`) and the tests that need a large, realistic
//! graph include this file as a module (`#[path = ".../bench/common/bench_graphs.rs"] mod
//! bench_graphs;`). Library users load their own models (graph.json, `.graph` or ONNX).
#![allow(dead_code)] // each including crate uses its own part

use serde_json::{json, Map, Value};

/// Sizes of an encoder.
#[derive(Clone, Copy, Debug)]
pub struct EncoderConfig {
    /// Number of encoder layers (attention + MLP blocks) stacked.
    pub layers: usize,
    /// Model width (hidden size, elements per token).
    pub hidden: i64,
    /// Attention heads; `hidden` must be a multiple of it.
    pub heads: i64,
    /// Inner width of the MLP block.
    pub mlp: i64,
    /// Default value of the symbolic sequence length `S`.
    pub seq_default: i64,
}

impl EncoderConfig {
    /// BERT-base sizes with `layers` layers.
    pub fn bert_base(layers: usize) -> EncoderConfig {
        EncoderConfig {
            layers,
            hidden: 768,
            heads: 12,
            mlp: 3072,
            seq_default: 128,
        }
    }
}

/// Accumulates tensors, signature inputs and nodes of a graph.json document.
struct Doc {
    tensors: Map<String, Value>,
    inputs: Vec<Value>,
    nodes: Vec<Value>,
}

impl Doc {
    fn param(&mut self, name: &str, shape: Value) -> String {
        self.tensors
            .insert(name.into(), json!({"dtype": "fp16", "shape": shape}));
        self.inputs
            .push(json!({"tensor": name, "role": "param", "storage": "const_pool"}));
        name.to_string()
    }

    fn node(&mut self, op: &str, name: &str, inputs: &[&str], attrs: Value) -> String {
        let out = format!("{name}.out");
        self.nodes.push(
            json!({"op": op, "name": name, "inputs": inputs, "outputs": [out], "attrs": attrs}),
        );
        out
    }

    /// `x · W + b` with `W: [k, n]`, `b: [n]`.
    fn linear(&mut self, p: &str, x: &str, k: i64, n: i64) -> String {
        let w = self.param(&format!("{p}.w"), json!([k, n]));
        let b = self.param(&format!("{p}.b"), json!([n]));
        let y = self.node("MatMul", &format!("{p}.mm"), &[x, &w], json!({}));
        self.node(
            "Elementwise",
            &format!("{p}.bias"),
            &[&y, &b],
            json!({"fn": "add"}),
        )
    }

    fn layer_norm(&mut self, p: &str, x: &str, h: i64) -> String {
        let g = self.param(&format!("{p}.gamma"), json!([h]));
        let b = self.param(&format!("{p}.beta"), json!([h]));
        self.node("LayerNorm", p, &[x, &g, &b], json!({}))
    }

    /// `[S, H] → [heads, S, H/heads]`.
    fn split_heads(&mut self, p: &str, x: &str, c: &EncoderConfig) -> String {
        let r = self.node(
            "Reshape",
            &format!("{p}.split"),
            &[x],
            json!({"shape": ["S", c.heads, c.hidden / c.heads]}),
        );
        self.node(
            "Permute",
            &format!("{p}.heads"),
            &[&r],
            json!({"perm": [1, 0, 2]}),
        )
    }
}

/// A `layers`-layer encoder: input `X: [S, hidden]`, output `Y: [S, hidden]`.
pub fn transformer_encoder(c: &EncoderConfig) -> Value {
    let mut d = Doc {
        tensors: Map::new(),
        inputs: vec![json!({"tensor": "X"})],
        nodes: Vec::new(),
    };
    d.tensors.insert(
        "X".into(),
        json!({"dtype": "fp16", "shape": ["S", c.hidden]}),
    );
    let h = c.hidden;
    let mut x = "X".to_string();
    for l in 0..c.layers {
        let p = format!("l{l}");
        let q = d.linear(&format!("{p}.q"), &x, h, h);
        let k = d.linear(&format!("{p}.k"), &x, h, h);
        let v = d.linear(&format!("{p}.v"), &x, h, h);
        let q = d.split_heads(&format!("{p}.q"), &q, c);
        let k = d.split_heads(&format!("{p}.k"), &k, c);
        let v = d.split_heads(&format!("{p}.v"), &v, c);
        let a = d.node("Attention", &format!("{p}.attn"), &[&q, &k, &v], json!({}));
        let a = d.node(
            "Permute",
            &format!("{p}.merge"),
            &[&a],
            json!({"perm": [1, 0, 2]}),
        );
        let a = d.node(
            "Reshape",
            &format!("{p}.concat"),
            &[&a],
            json!({"shape": ["S", h]}),
        );
        let o = d.linear(&format!("{p}.o"), &a, h, h);
        let r = d.node(
            "Elementwise",
            &format!("{p}.res1"),
            &[&o, &x],
            json!({"fn": "add"}),
        );
        let n1 = d.layer_norm(&format!("{p}.ln1"), &r, h);
        let f = d.linear(&format!("{p}.ff1"), &n1, h, c.mlp);
        let f = d.node(
            "Elementwise",
            &format!("{p}.gelu"),
            &[&f],
            json!({"fn": "gelu"}),
        );
        let f = d.linear(&format!("{p}.ff2"), &f, c.mlp, h);
        let r = d.node(
            "Elementwise",
            &format!("{p}.res2"),
            &[&f, &n1],
            json!({"fn": "add"}),
        );
        x = d.layer_norm(&format!("{p}.ln2"), &r, h);
    }
    // The signature output gets the stable name `Y`.
    if let Some(last) = d.nodes.last_mut() {
        last["outputs"] = json!(["Y"]);
    }
    d.tensors
        .insert("Y".into(), json!({"dtype": "fp16", "shape": ["S", h]}));
    json!({
        "signature": {"inputs": d.inputs, "outputs": [{"tensor": "Y"}]},
        "symbols": {"S": c.seq_default},
        "tensors": d.tensors,
        "graph": d.nodes,
    })
}
