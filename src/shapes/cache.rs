//! The plan cache: one optimized program per (graph, target, optimizer variant, shape cluster),
//! in memory and optionally in a directory (`--plan-cache DIR`), one JSON file per entry.
//!
//! * The key is `<graph hash>-<arch>-<variant>/<cluster key>`: the graph hash is FNV-1a 64 over
//!   the graph file's bytes ([`graph_hash`]), `variant` names the optimizer options that change
//!   the result and that the command line exposes (`std` or `fast_math`, the extractor, and `no_compute_at` when compute-at fusion is off);
//!   the cluster key lists symbols in name order. Nothing depends on hash-map iteration order.
//! * A file is `<graph hash>-<arch>-<fnv of the full key>.json`; it stores its full key, and a
//!   file whose key or format differs, or that does not parse, is a miss (it is overwritten).
//! * An entry stores what `run --optimized` needs: the specialization (factors), the pricing
//!   binding, the region program and, for reports, each kernel's plan; CUDA is re-emitted from
//!   the region program on a hit (emission is cheap next to optimization and depends only on
//!   the program and the target, `crate::pipeline::plan_and_emit`).
//!
//! TODO(issue 6): measured kernel times are not cached yet (seed 001 §12 "Plan/実測"); an entry
//! holds predictions only. TODO(issue 6): no eviction; the directory grows by one file per cluster.

use super::cluster::ShapeCluster;
use super::specialize::{graph_symbols, Factor, Specialization};
use super::ShapeError;
use crate::extract::kernels::CostModel;
use crate::ir::frontend::Graph;
use crate::ir::region::program::RegionProgram;
use crate::optimize::{ExtractorKind, OptimizeOptions, Optimized};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Version of the entry format; entries of another version are misses.
pub const CACHE_FORMAT: u32 = 2;

/// FNV-1a, 64 bits, as 16 hex digits (a cache key, not a security measure).
pub fn fnv64(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The hash of a graph file's contents.
pub fn graph_hash(contents: &[u8]) -> String {
    fnv64(contents)
}

/// The hash of an in-memory graph (no file): its normalized form's `Debug` text, which is
/// deterministic (ordered maps only).
pub fn loaded_graph_hash(graph: &Graph) -> String {
    fnv64(format!("{graph:?}").as_bytes())
}

/// One cache entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachedPlan {
    /// The cache entry's format version.
    pub format: u32,
    /// The cache key.
    pub key: String,
    /// The cluster's key and readable description.
    pub cluster: String,
    /// The cluster's ranges, as text.
    pub cluster_ranges: String,
    /// `T -> (d, T_d)` for every specialized symbol.
    pub factors: BTreeMap<String, Factor>,
    /// The binding (of the specialized program's symbols) the kernels were priced with.
    pub pricing: BTreeMap<String, i64>,
    /// The optimized region program (symbols of the specialized graph).
    pub program: RegionProgram,
    /// Per kernel: `{"kernel", "predicted_us", "template", "plan"}` or `{"kernel", "error"}`.
    pub kernels: Vec<serde_json::Value>,
}

impl CachedPlan {
    /// The specialization this entry was compiled with.
    pub fn specialization(&self, cluster: &ShapeCluster) -> Specialization {
        Specialization {
            cluster: cluster.clone(),
            factors: self.factors.clone(),
        }
    }

    /// The cost model to emit CUDA from [`CachedPlan::program`] with.
    pub fn model(&self, opts: &OptimizeOptions) -> CostModel {
        CostModel {
            bindings: self.pricing.clone(),
            default_size: opts.default_size,
            target: opts.target.clone(),
            regions: None,
        }
    }
}

/// Whether a lookup found its entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Found in the cache (key).
    Hit(String),
    /// Not found: optimized and stored (key).
    Miss(String),
}

impl std::fmt::Display for CacheOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheOutcome::Hit(k) => write!(f, "plan cache: hit {k}"),
            CacheOutcome::Miss(k) => write!(f, "plan cache: miss {k}"),
        }
    }
}

/// The result of [`PlanCache::compile`].
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The cached plan.
    pub plan: Arc<CachedPlan>,
    /// Hit or miss.
    pub outcome: CacheOutcome,
    /// The cluster of the binding.
    pub cluster: ShapeCluster,
    /// The binding of the specialized program's symbols (`T_d = T / d`).
    pub bindings: BTreeMap<String, i64>,
}

/// Plans per shape cluster, in memory and optionally on disk.
#[derive(Debug, Default)]
pub struct PlanCache {
    dir: Option<PathBuf>,
    memory: Mutex<BTreeMap<String, Arc<CachedPlan>>>,
}

/// The optimizer options that change the result (see the module doc).
fn variant(opts: &OptimizeOptions) -> String {
    let ex = match opts.extractor {
        ExtractorKind::Fast => "fast",
        ExtractorKind::Exact => "exact",
    };
    let fm = if opts.fast_math { "fast_math" } else { "std" };
    // Compute-at on is the default and keeps the key short.
    let ca = if opts.compute_at {
        ""
    } else {
        ".no_compute_at"
    };
    // A library user's rules, phases, pricer or extractor change the result too.
    let ext = opts.extensions.key();
    let ext = if ext.is_empty() {
        String::new()
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        ext.hash(&mut h);
        format!(".ext{:016x}", h.finish())
    };
    format!("{fm}.{ex}{ca}{ext}")
}

impl PlanCache {
    /// A cache in memory only.
    pub fn in_memory() -> PlanCache {
        PlanCache::default()
    }

    /// A cache that also reads and writes `dir` (created on the first write).
    pub fn on_disk(dir: &Path) -> PlanCache {
        PlanCache {
            dir: Some(dir.to_path_buf()),
            memory: Mutex::default(),
        }
    }

    /// The key of a graph (by hash) on a target, with options, in a cluster.
    pub fn key(graph_hash: &str, opts: &OptimizeOptions, cluster: &ShapeCluster) -> String {
        format!(
            "{graph_hash}-{}-{}/{}",
            opts.target.arch.name(),
            variant(opts),
            cluster.key()
        )
    }

    fn file(&self, graph_hash: &str, opts: &OptimizeOptions, key: &str) -> Option<PathBuf> {
        let name = format!(
            "{graph_hash}-{}-{}.json",
            opts.target.arch.name(),
            fnv64(key.as_bytes())
        );
        self.dir.as_ref().map(|d| d.join(name))
    }

    fn lookup(&self, key: &str, file: Option<&Path>) -> Option<Arc<CachedPlan>> {
        if let Some(p) = self.lock().get(key) {
            return Some(p.clone());
        }
        let text = std::fs::read_to_string(file?).ok()?;
        let plan: CachedPlan = serde_json::from_str(&text).ok()?;
        if plan.format != CACHE_FORMAT || plan.key != key {
            return None;
        }
        let plan = Arc::new(plan);
        self.lock().insert(key.to_string(), plan.clone());
        Some(plan)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<CachedPlan>>> {
        self.memory.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn store(&self, plan: Arc<CachedPlan>, file: Option<&Path>) -> Result<(), ShapeError> {
        if let Some(path) = file {
            let write_err = |why: String| ShapeError::CacheWrite {
                path: path.display().to_string(),
                why,
            };
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| write_err(e.to_string()))?;
            }
            let text =
                serde_json::to_string_pretty(&*plan).map_err(|e| write_err(e.to_string()))?;
            // Write then rename, so a concurrent reader never sees half a file.
            let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
            std::fs::write(&tmp, text + "\n").map_err(|e| write_err(e.to_string()))?;
            std::fs::rename(&tmp, path).map_err(|e| write_err(e.to_string()))?;
        }
        self.lock().insert(plan.key.clone(), plan);
        Ok(())
    }

    /// The plan of `graph` (hashed as `graph_hash`) for the cluster of `binding` (the graph's
    /// symbols among its keys are clustered; others pass through), optimizing on a miss.
    ///
    /// A miss specializes the graph ([`Specialization`]), lowers it and optimizes it with the
    /// cluster representative as pricing binding. Should the specialized graph fail to lower or
    /// optimize (it never should; it is the same graph with sizes written differently), the
    /// cluster is compiled unspecialized rather than failing the run.
    pub fn compile(
        &self,
        graph: &Graph,
        graph_hash: &str,
        binding: &BTreeMap<String, i64>,
        opts: &OptimizeOptions,
    ) -> Result<Compiled, ShapeError> {
        let symbols = graph_symbols(graph);
        let clustered: BTreeMap<String, i64> = binding
            .iter()
            .filter(|(s, _)| symbols.contains(*s))
            .map(|(s, v)| (s.clone(), *v))
            .collect();
        let cluster = ShapeCluster::of(&clustered)?;
        let key = PlanCache::key(graph_hash, opts, &cluster);
        let file = self.file(graph_hash, opts, &key);
        let (plan, outcome) = match self.lookup(&key, file.as_deref()) {
            Some(p) => (p, CacheOutcome::Hit(key)),
            None => {
                let plan = Arc::new(build_plan(graph, &cluster, &key, opts)?);
                self.store(plan.clone(), file.as_deref())?;
                (plan, CacheOutcome::Miss(key))
            }
        };
        let bindings = plan.specialization(&cluster).bind(binding)?;
        Ok(Compiled {
            plan,
            outcome,
            cluster,
            bindings,
        })
    }
}

/// Specializes, lowers and optimizes `graph` for `cluster` (see [`PlanCache::compile`]).
pub fn build_plan(
    graph: &Graph,
    cluster: &ShapeCluster,
    key: &str,
    opts: &OptimizeOptions,
) -> Result<CachedPlan, ShapeError> {
    let spec = Specialization::new(cluster, &graph_symbols(graph));
    let (spec, o) = match optimize_specialized(graph, &spec, opts) {
        Ok(o) => (spec, o),
        Err(_) if !spec.factors.is_empty() => {
            let plain = Specialization {
                cluster: cluster.clone(),
                factors: BTreeMap::new(),
            };
            let o = optimize_specialized(graph, &plain, opts)?;
            (plain, o)
        }
        Err(e) => return Err(e),
    };
    let pricing = spec.bind(&cluster.representative())?;
    Ok(CachedPlan {
        format: CACHE_FORMAT,
        key: key.to_string(),
        cluster: cluster.key(),
        cluster_ranges: cluster.describe(),
        factors: spec.factors.clone(),
        pricing,
        kernels: kernel_plans(&o),
        program: o.program,
    })
}

/// The specialized graph of `spec`, lowered, verified and optimized with `spec`'s cluster
/// representative as the pricing binding.
pub fn optimize_specialized(
    graph: &Graph,
    spec: &Specialization,
    opts: &OptimizeOptions,
) -> Result<Optimized, ShapeError> {
    let g = spec.apply(graph);
    let prog = crate::lower::lower_and_verify(&g).map_err(|f| ShapeError::Lower(f.to_string()))?;
    let mut opts = opts.clone();
    opts.pricing = spec.bind(&spec.cluster.representative())?;
    crate::optimize::optimize_graph(&g, &prog, &opts).map_err(|e| ShapeError::Optimize {
        cluster: spec.cluster.key(),
        why: e.to_string(),
    })
}

/// Per kernel: name, template, predicted time and plan (or why there is none).
pub fn kernel_plans(o: &Optimized) -> Vec<serde_json::Value> {
    o.kernels
        .iter()
        .map(|k| match &k.plan {
            Ok(p) => serde_json::json!({
                "kernel": k.name,
                "template": p.template,
                "predicted_us": p.predicted_us,
                "plan": p.plan,
            }),
            Err(why) => serde_json::json!({"kernel": k.name, "error": why}),
        })
        .collect()
}
