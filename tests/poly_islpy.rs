//! Cross-check of the affine engine (`dlc_egg::poly::affine`) against isl (islpy, the oracle):
//! a seeded generator asks a few hundred questions — images and pre-images of tiles under
//! conv (stride, dilation, padding), pool and matmul accesses, per-dimension bounds, emptiness,
//! containment, RAW dependences (conv → pool, matmul → matmul, slices) and coalescing of padded
//! domains — the engine answers them, and `tests/poly/isl_oracle.py` checks every answer with
//! islpy in one process (bounds compared per dimension as piecewise affine functions; an
//! "over" answer must enclose isl's; "unknown" is allowed but counted).
//!
//! islpy lives in the git-ignored `.islpy/` (`bash scripts/install-islpy.sh`). Without it the
//! test prints a skip message, unless `CI=true`, where it fails.

use dlc_egg::poly::affine::isl::{parse_map, parse_set};
use dlc_egg::poly::affine::{AffineError, Answer, Exactness, Set, SimplifyBudget};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Command;

struct Q {
    kind: &'static str,
    desc: String,
    inputs: Vec<(&'static str, String)>,
}

fn q(kind: &'static str, desc: String, inputs: Vec<(&'static str, String)>) -> Q {
    Q { kind, desc, inputs }
}

/// `[a, b] -> ` for the parameters that are names (symbolic sizes / tile origins).
fn prefix(params: &[&str]) -> String {
    if params.is_empty() {
        String::new()
    } else {
        format!("[{}] -> ", params.join(", "))
    }
}

/// A size: a parameter `name` (with `name >= min` in the context) or a concrete value.
fn size(
    rng: &mut ChaCha8Rng,
    name: &'static str,
    lo: i64,
    hi: i64,
    params: &mut Vec<&'static str>,
    ctx: &mut Vec<String>,
) -> String {
    if rng.gen_bool(0.5) {
        params.push(name);
        ctx.push(format!("{name} >= {lo}"));
        name.to_string()
    } else {
        rng.gen_range(lo..=hi).to_string()
    }
}

fn and(cs: &[String]) -> String {
    cs.join(" and ")
}

/// Conv (stride s, dilation d, padding p, kernel K): the input rows read by an output tile.
fn conv_tile(rng: &mut ChaCha8Rng) -> Vec<Q> {
    let (s, d, p, k) = (
        rng.gen_range(1..=3),
        rng.gen_range(1..=2),
        rng.gen_range(0..=2),
        [1, 2, 3, 5][rng.gen_range(0..4)],
    );
    let t = [1, 2, 4, 8][rng.gen_range(0..4)];
    let two_d = rng.gen_bool(0.4);
    let mut params = vec!["h0"];
    let mut ctx = vec!["h0 >= 0".to_string()];
    let ho = size(rng, "Ho", 1, 20, &mut params, &mut ctx);
    let h = size(rng, "H", 1, 40, &mut params, &mut ctx);
    let pre = prefix(&params);
    let idx = format!("{s}h + {d}r - {p}");
    let (tuple, map, dom) = if two_d {
        (
            "S[c, h, w, r, q]",
            format!("{pre}{{ S[c, h, w, r, q] -> In[c, {idx}, {s}w + {d}q - {p}] }}"),
            and(&[
                format!("0 <= c < 3 and {t}h0 <= h < {t}h0 + {t} and 0 <= h < {ho}"),
                format!("0 <= w < 4 and 0 <= r < {k} and 0 <= q < {k}"),
            ]),
        )
    } else {
        (
            "S[h, r]",
            format!("{pre}{{ S[h, r] -> In[{idx}] }}"),
            format!("{t}h0 <= h < {t}h0 + {t} and 0 <= h < {ho} and 0 <= r < {k}"),
        )
    };
    let mut all = ctx.clone();
    all.push(dom);
    let dom = format!("{pre}{{ {tuple} : {} }}", and(&all));
    let desc = format!("conv tile s={s} d={d} p={p} K={k} T={t} 2d={two_d}");
    let clip = if two_d {
        format!("{pre}{{ In[c, x, y] : 0 <= x < {h} and 0 <= y < 8 }}")
    } else {
        format!("{pre}{{ In[x] : 0 <= x < {h} }}")
    };
    vec![
        q(
            "image",
            desc.clone(),
            vec![("dom", dom.clone()), ("map", map.clone())],
        ),
        q(
            "image",
            desc + " (valid rows)",
            vec![("dom", dom), ("map", map), ("clip", clip)],
        ),
    ]
}

/// Conv: the output rows and kernel offsets that read an input tile `[x0, x0 + L)`.
fn conv_preimage(rng: &mut ChaCha8Rng) -> Q {
    let (s, d, p, k) = (
        rng.gen_range(1..=3),
        rng.gen_range(1..=2),
        rng.gen_range(0..=2),
        rng.gen_range(1..=4),
    );
    let l = rng.gen_range(1..=6);
    let mut params = vec!["x0"];
    let mut ctx = vec![];
    let ho = size(rng, "Ho", 1, 16, &mut params, &mut ctx);
    let pre = prefix(&params);
    let mut dom = ctx.clone();
    dom.push(format!("0 <= h < {ho} and 0 <= r < {k}"));
    q(
        "preimage",
        format!("conv pre-image s={s} d={d} p={p} K={k} L={l}"),
        vec![
            ("dom", format!("{pre}{{ S[h, r] : {} }}", and(&dom))),
            (
                "map",
                format!("{pre}{{ S[h, r] -> In[{s}h + {d}r - {p}] }}"),
            ),
            ("tile", format!("{pre}{{ In[x] : x0 <= x < x0 + {l} }}")),
        ],
    )
}

/// Conv → pool (seed 003): the conv iterations a pool tile depends on.
fn conv_pool_raw(rng: &mut ChaCha8Rng, fixed: Option<(i64, i64, i64)>) -> Q {
    let (pk, sp, t) = fixed.unwrap_or((
        rng.gen_range(1..=3),
        rng.gen_range(1..=3),
        [1, 2, 4][rng.gen_range(0..3)],
    ));
    let kc = rng.gen_range(1..=3);
    let mut params = vec!["h0", "w0"];
    let mut ctx = vec!["h0 >= 0 and w0 >= 0".to_string()];
    let ho = size(rng, "Ho", 1, 24, &mut params, &mut ctx);
    let ph = size(rng, "Ph", 1, 8, &mut params, &mut ctx);
    let pre = prefix(&params);
    let c = and(&ctx);
    q(
        "raw",
        format!("conv->pool PK={pk} Sp={sp} T={t} Kc={kc}"),
        vec![
            ("w", format!("{pre}{{ S_conv[k, h, w, c, rh, rw] -> Out[k, h, w] }}")),
            ("dw", format!("{pre}{{ S_conv[k, h, w, c, rh, rw] : {c} and 0 <= k < 2 and 0 <= h < {ho} and 0 <= w < {ho} and 0 <= c < 2 and 0 <= rh < {kc} and 0 <= rw < {kc} }}")),
            ("r", format!("{pre}{{ S_pool[k, h, w, rh, rw] -> Out[k, {sp}h + rh, {sp}w + rw] }}")),
            ("dr", format!("{pre}{{ S_pool[k, h, w, rh, rw] : {c} and 0 <= k < 2 and 0 <= h < {ph} and 0 <= w < {ph} and 0 <= rh < {pk} and 0 <= rw < {pk} }}")),
            ("tile", format!("{pre}{{ S_pool[k, h, w, rh, rw] : {t}h0 <= h < {t}h0 + {t} and {t}w0 <= w < {t}w0 + {t} }}")),
        ],
    )
}

/// Matmul → matmul: the first product's iterations a tile of the second depends on, and the
/// operand footprint of a tile.
fn matmul(rng: &mut ChaCha8Rng) -> Vec<Q> {
    let (ti, tj) = (
        [1, 4, 16][rng.gen_range(0..3)],
        [1, 8, 32][rng.gen_range(0..3)],
    );
    let mut params = vec!["i0", "j0"];
    let mut ctx = vec!["i0 >= 0 and j0 >= 0".to_string()];
    let m = size(rng, "M", 1, 64, &mut params, &mut ctx);
    let n = size(rng, "N", 1, 64, &mut params, &mut ctx);
    let kk = size(rng, "K", 1, 64, &mut params, &mut ctx);
    let pre = prefix(&params);
    let c = and(&ctx);
    let dom1 =
        format!("{pre}{{ S1[i, j, k] : {c} and 0 <= i < {m} and 0 <= j < {n} and 0 <= k < {kk} }}");
    let dom2 =
        format!("{pre}{{ S2[i, j, k] : {c} and 0 <= i < {m} and 0 <= j < {kk} and 0 <= k < {n} }}");
    let tile = format!(
        "{pre}{{ S2[i, j, k] : {ti}i0 <= i < {ti}i0 + {ti} and {tj}j0 <= j < {tj}j0 + {tj} }}"
    );
    let tile_dom = format!("{pre}{{ S1[i, j, k] : {c} and {ti}i0 <= i < {ti}i0 + {ti} and {tj}j0 <= j < {tj}j0 + {tj} and 0 <= i < {m} and 0 <= j < {n} and 0 <= k < {kk} }}");
    vec![
        q(
            "raw",
            format!("matmul->matmul Ti={ti} Tj={tj}"),
            vec![
                ("w", format!("{pre}{{ S1[i, j, k] -> C[i, j] }}")),
                ("dw", dom1),
                ("r", format!("{pre}{{ S2[i, j, k] -> C[i, k] }}")),
                ("dr", dom2),
                ("tile", tile),
            ],
        ),
        q(
            "image",
            format!("matmul A footprint Ti={ti} Tj={tj}"),
            vec![
                ("dom", tile_dom.clone()),
                ("map", format!("{pre}{{ S1[i, j, k] -> A[i, k] }}")),
            ],
        ),
        q(
            "image",
            format!("matmul B^T footprint Ti={ti} Tj={tj}"),
            vec![
                ("dom", tile_dom),
                ("map", format!("{pre}{{ S1[i, j, k] -> B[j, k] }}")),
            ],
        ),
    ]
}

/// Slices `X[s·i + a]`: overlaps of two slices (emptiness), containment in the tensor, and
/// the dependence of a sliced read on a strided write.
fn slices(rng: &mut ChaCha8Rng) -> Vec<Q> {
    let (s1, a1, s2, a2) = (
        rng.gen_range(1..=4),
        rng.gen_range(0..=5),
        rng.gen_range(1..=4),
        rng.gen_range(0..=5),
    );
    let (n1, n2) = (rng.gen_range(1..=8), rng.gen_range(1..=8));
    let mut params = vec![];
    let mut ctx = vec![];
    let nn = size(rng, "N", 1, 40, &mut params, &mut ctx);
    let pre = prefix(&params);
    let c = if ctx.is_empty() {
        String::new()
    } else {
        format!("{} and ", and(&ctx))
    };
    let overlap = format!("{pre}{{ X[x] : {c}exists (i, j : x = {s1}i + {a1} and 0 <= i < {n1} and x = {s2}j + {a2} and 0 <= j < {n2}) }}");
    let img = format!("{pre}{{ X[x] : {c}exists (i : x = {s1}i + {a1} and 0 <= i < {n1}) }}");
    let tensor = format!("{pre}{{ X[x] : {c}0 <= x < {nn} }}");
    vec![
        q(
            "empty",
            format!("slice overlap {s1}i+{a1} vs {s2}j+{a2}"),
            vec![("set", overlap)],
        ),
        q(
            "subset",
            format!("slice {s1}i+{a1} (n={n1}) in X[0,{nn})"),
            vec![("a", img), ("b", tensor)],
        ),
        q(
            "raw",
            format!("strided write {s1}i+{a1} -> slice read {s2}j+{a2}"),
            vec![
                ("w", format!("{pre}{{ W[i] -> X[{s1}i + {a1}] }}")),
                ("dw", format!("{pre}{{ W[i] : {c}0 <= i < {n1} }}")),
                ("r", format!("{pre}{{ R[j] -> X[{s2}j + {a2}] }}")),
                ("dr", format!("{pre}{{ R[j] : {c}0 <= j < {n2} }}")),
                ("tile", format!("{pre}{{ R[j] : 0 <= j < {n2} }}")),
            ],
        ),
    ]
}

/// Random small systems: a box with one random extra constraint (emptiness), and box
/// containment with shifted bounds.
fn random_sets(rng: &mut ChaCha8Rng) -> Vec<Q> {
    let mut params = vec![];
    let mut ctx = vec![];
    let n = size(rng, "N", 0, 6, &mut params, &mut ctx);
    let pre = prefix(&params);
    let mut cs = ctx.clone();
    let (l1, l2) = (rng.gen_range(0..4), rng.gen_range(0..4));
    cs.push(format!(
        "{l1} <= i < {n} + {} and {l2} <= j < {}",
        rng.gen_range(0..3),
        rng.gen_range(1..6)
    ));
    let (a, b, c) = (
        rng.gen_range(-4..=4),
        rng.gen_range(-4..=4),
        rng.gen_range(-9..=9),
    );
    let op = ["=", ">=", "<="][rng.gen_range(0..3)];
    cs.push(format!("{a}i + {b}j {op} {c}"));
    if rng.gen_bool(0.3) {
        let m = rng.gen_range(2..=4);
        cs.push(format!("exists (e : i = {m}e + {})", rng.gen_range(0..m)));
    }
    let set = format!("{pre}{{ S[i, j] : {} }}", and(&cs));
    let (d1, d2, d3) = (
        rng.gen_range(-1..=1),
        rng.gen_range(-1..=1),
        rng.gen_range(-1..=2),
    );
    let ctxs = if ctx.is_empty() {
        String::new()
    } else {
        format!("{} and ", and(&ctx))
    };
    let a_box = format!("{pre}{{ S[i, j] : {ctxs}0 <= i < {n} and 0 <= j <= i + 2 }}");
    let b_box =
        format!("{pre}{{ S[i, j] : {ctxs}{d1} <= i < {n} + {d2} and 0 <= j <= i + 2 + {d3} }}");
    vec![
        q(
            "empty",
            format!("random {a}i+{b}j{op}{c}"),
            vec![("set", set.clone())],
        ),
        q(
            "image",
            "random set bounds".into(),
            vec![
                ("dom", set),
                ("map", format!("{pre}{{ S[i, j] -> T[i, j, i + j] }}")),
            ],
        ),
        q(
            "subset",
            format!("box shift {d1} {d2} {d3}"),
            vec![("a", a_box), ("b", b_box)],
        ),
    ]
}

/// A padded domain in three pieces (pad P, body H) with the context that merges them.
fn padded(rng: &mut ChaCha8Rng) -> Q {
    let p = if rng.gen_bool(0.5) {
        "P".to_string()
    } else {
        rng.gen_range(0..=3).to_string()
    };
    let params = if p == "P" { "[P, H]" } else { "[H]" };
    let ctx = if p == "P" {
        "H >= 1 and P >= 0"
    } else {
        "H >= 1"
    };
    let w = rng.gen_range(1..=3);
    q(
        "coalesce",
        format!("padded domain pad={p} width={w}"),
        vec![
            ("set", format!("{params} -> {{ S[i, j] : 0 <= i < {p} and 0 <= j < {w}; S[i, j] : {p} <= i < {p} + H and 0 <= j < {w}; S[i, j] : {p} + H <= i < 2*{p} + H and 0 <= j < {w} }}")),
            ("ctx", format!("{params} -> {{ : {ctx} }}")),
        ],
    )
}

/// A reshape through floordiv: `X[floor(i / W), i - W floor(i / W)]`.
fn reshape(rng: &mut ChaCha8Rng) -> Q {
    let w = rng.gen_range(2..=5);
    let lo = rng.gen_range(0..=10);
    let len = rng.gen_range(1..=12);
    q(
        "image",
        format!("reshape W={w} [{lo}, {lo}+{len})"),
        vec![
            ("dom", format!("{{ S[i] : {lo} <= i < {} }}", lo + len)),
            (
                "map",
                format!("{{ S[i] -> X[floor(i/{w}), i - {w}*floor(i/{w})] }}"),
            ),
        ],
    )
}

fn answer_text(a: Answer) -> &'static str {
    match a {
        Answer::Yes => "yes",
        Answer::No => "no",
        Answer::Unknown => "unknown",
    }
}

fn bounds_json(s: &Set) -> Result<Value, AffineError> {
    Ok(match s.bounds()? {
        None => Value::Null,
        Some(bs) => Value::Array(
            bs.iter()
                .map(|b| {
                    json!({"lower": b.lower.to_string(), "upper": b.upper.to_string(),
                           "exact": b.exactness == Exactness::Exact})
                })
                .collect(),
        ),
    })
}

/// The engine's answer to one question.
fn engine(q: &Q) -> Result<Value, AffineError> {
    let get = |k: &str| {
        q.inputs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    Ok(match q.kind {
        "empty" => json!({"answer": answer_text(parse_set(get("set"))?.is_empty()?)}),
        "subset" => {
            json!({"answer": answer_text(parse_set(get("a"))?.is_subset(&parse_set(get("b"))?)?)})
        }
        "image" => {
            let mut img = parse_set(get("dom"))?.apply(&parse_map(get("map"))?)?;
            if !get("clip").is_empty() {
                img = img.intersect(&parse_set(get("clip"))?)?;
            }
            json!({"set": img.to_string(), "bounds": bounds_json(&img)?})
        }
        "preimage" => {
            let dom = parse_set(get("dom"))?;
            let m = parse_map(get("map"))?.intersect_domain(&dom)?;
            let pre = parse_set(get("tile"))?.preimage(&m)?;
            json!({"set": pre.to_string(), "bounds": bounds_json(&pre)?})
        }
        "raw" => {
            let w = parse_map(get("w"))?.intersect_domain(&parse_set(get("dw"))?)?;
            let r = parse_map(get("r"))?.intersect_domain(&parse_set(get("dr"))?)?;
            let dep = w.apply_range(&r.reverse())?;
            let pre = parse_set(get("tile"))?.preimage(&dep)?;
            json!({"map": dep.to_string(), "set": pre.to_string(), "bounds": bounds_json(&pre)?})
        }
        "coalesce" => {
            let ctx = parse_set(get("ctx"))?;
            let c = parse_set(get("set"))?
                .coalesce(ctx.pieces().first(), &SimplifyBudget::default())?;
            json!({"set": c.to_string(), "pieces": c.pieces().len()})
        }
        _ => unreachable!(),
    })
}

fn questions() -> Vec<Q> {
    let mut rng = ChaCha8Rng::seed_from_u64(0x0001_5106);
    let mut qs = Vec::new();
    // The seed 003 examples first: PK=2, Sp=2 and PK=3, Sp=2 on 4x4 pool tiles.
    qs.push(conv_pool_raw(&mut rng, Some((2, 2, 4))));
    qs.push(conv_pool_raw(&mut rng, Some((3, 2, 4))));
    for _ in 0..30 {
        qs.extend(conv_tile(&mut rng));
    }
    for _ in 0..25 {
        qs.push(conv_preimage(&mut rng));
    }
    for _ in 0..20 {
        qs.push(conv_pool_raw(&mut rng, None));
    }
    for _ in 0..10 {
        qs.extend(matmul(&mut rng));
    }
    for _ in 0..12 {
        qs.extend(slices(&mut rng));
    }
    for _ in 0..15 {
        qs.extend(random_sets(&mut rng));
    }
    for _ in 0..8 {
        qs.push(padded(&mut rng));
    }
    for _ in 0..8 {
        qs.push(reshape(&mut rng));
    }
    qs
}

#[test]
fn engine_agrees_with_islpy() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let islpy = root.join(".islpy");
    if !islpy.join("islpy").is_dir() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("islpy is missing in .islpy/ (run bash scripts/install-islpy.sh)");
        }
        eprintln!(
            "skipping the islpy cross-check: .islpy/ is missing (bash scripts/install-islpy.sh)"
        );
        return;
    }
    let qs = questions();
    assert!(qs.len() >= 200, "only {} questions", qs.len());
    let start = std::time::Instant::now();
    let mut list = Vec::new();
    let (mut exact, mut over, mut unknown) = (0, 0, 0);
    let mut over_by = std::collections::BTreeMap::new();
    for (id, q) in qs.iter().enumerate() {
        let eng = engine(q).unwrap_or_else(|e| json!({"error": e.to_string()}));
        for b in eng
            .get("bounds")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if b["exact"] == json!(true) {
                exact += 1;
            } else {
                over += 1;
                let family: String = q
                    .desc
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                *over_by.entry(family).or_insert(0usize) += 1;
            }
        }
        unknown += usize::from(eng.get("answer") == Some(&json!("unknown")));
        let inputs: serde_json::Map<String, Value> = q
            .inputs
            .iter()
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        list.push(
            json!({"id": id, "kind": q.kind, "desc": q.desc, "inputs": inputs, "engine": eng}),
        );
    }
    let engine_time = start.elapsed();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("questions.json");
    std::fs::write(&file, serde_json::to_string(&list).unwrap()).unwrap();
    let out = Command::new("python3")
        .arg(root.join("tests/poly/isl_oracle.py"))
        .arg(&file)
        .env("PYTHONPATH", &islpy)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let verdicts: Vec<Value> = serde_json::from_slice(&out.stdout).expect("oracle JSON");
    assert_eq!(verdicts.len(), list.len());
    let mut failures = Vec::new();
    for (v, q) in verdicts.iter().zip(&list) {
        if v["ok"] != json!(true) {
            failures.push(format!(
                "#{} {} ({}): {}\n  inputs: {}\n  engine: {}",
                q["id"],
                q["kind"],
                q["desc"].as_str().unwrap_or(""),
                v["msg"].as_str().unwrap_or(""),
                q["inputs"],
                q["engine"]
            ));
        }
    }
    eprintln!(
        "islpy cross-check: {} questions, {} failures; bounds exact {exact}, over {over}; \
         yes/no answers unknown {unknown}; engine {:.2?}; over-approximated bounds by family: \
         {over_by:?}",
        list.len(),
        failures.len(),
        engine_time
    );
    assert!(
        failures.is_empty(),
        "{} disagreements:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        unknown * 10 <= list.len(),
        "too many unknown answers: {unknown}"
    );
}
