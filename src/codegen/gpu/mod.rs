//! The GPU dialect IR (seed 001 §9): one [`Kernel`] per region — a fixed skeleton chosen by the
//! template, with the Plan injected (tile sizes, stages, vector widths, binding), written as
//! structured statements whose scalar arithmetic is C expression text. What the IR makes explicit
//! is what must be checked before any CUDA exists:
//!
//! - **Async tokens** (§9.2): [`Stmt::CpAsync`] issues a copy into the group of a `TokLoad`
//!   token, [`Stmt::Commit`] closes the group, [`Stmt::Wait`] (SM80 `cp.async.wait_group`)
//!   makes tokens ready, and every consumer of staged data ([`Stmt::LdMatrix`],
//!   [`Stmt::SmemUse`]) names the token it needs; [`Stmt::Mma`] produces a `TokCompute` that the
//!   [`Stmt::Epilogue`] consumes, producing a `TokEpilogue`.
//! - **Divergence**: every `If`/`For` says whether its condition is uniform over the block, over
//!   a warp, or per thread; barriers and warp collectives may only sit under uniform control.
//! - **Shared memory**: every buffer is declared with its size, so the total is known.
//!
//! [`verify`] checks the three; [`render`] prints CUDA C (a direct rendering: every statement is
//! one C statement or block); `--dump gpu` prints the IR as JSON (`{"gpu_ir": …}`).

pub mod render;
pub mod verify;

use crate::ir::region::Size;
use crate::target::Arch;
use serde::Serialize;

/// A C scalar or vector type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CType {
    /// `float` (4 bytes).
    F32,
    /// `int` (32-bit signed).
    I32,
    /// `unsigned` (32-bit).
    U32,
    /// `long long` (64-bit signed; index arithmetic that can pass 2^31).
    I64,
    /// `bool` (1 byte).
    Bool,
    /// `__half` (IEEE fp16).
    Half,
    /// `__nv_bfloat16` (bf16).
    Bf16,
    /// 16 bytes (`uint4`).
    U4,
}

impl CType {
    /// The C spelling.
    pub fn c(self) -> &'static str {
        match self {
            CType::F32 => "float",
            CType::I32 => "int",
            CType::U32 => "unsigned",
            CType::I64 => "long long",
            CType::Bool => "bool",
            CType::Half => "__half",
            CType::Bf16 => "__nv_bfloat16",
            CType::U4 => "uint4",
        }
    }

    /// Size in bytes.
    pub fn bytes(self) -> u64 {
        match self {
            CType::Bool => 1,
            CType::Half | CType::Bf16 => 2,
            CType::F32 | CType::I32 | CType::U32 => 4,
            CType::I64 => 8,
            CType::U4 => 16,
        }
    }

    /// The storage type of a tensor element type.
    pub fn of(d: crate::ir::dtype::DType) -> CType {
        use crate::ir::dtype::DType;
        match d {
            DType::F16 => CType::Half,
            DType::BF16 => CType::Bf16,
            DType::F32 => CType::F32,
            DType::I32 => CType::I32,
            DType::Bool => CType::Bool,
        }
    }
}

/// What a kernel parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    /// `const T* __restrict__`.
    Input,
    /// `T* __restrict__`.
    Output,
    /// `int` (a symbol's value).
    Symbol,
    /// `const __grid_constant__ dlc_tmap` (a TMA tensor map over an input, [`Param::tmap`]).
    TensorMap,
    /// `T* __restrict__`: scratch memory the kernel reads and writes, owned by the launch
    /// ([`Param::workspace`]; split-K's partial tiles and tile counters).
    Workspace,
}

/// What a [`ParamKind::Workspace`] parameter needs: `elems` elements of the parameter's type,
/// zero before the first launch when `zeroed` (a kernel that needs zeros leaves them zero
/// again, so one allocation serves every launch), otherwise of any content.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkspaceParam {
    /// Elements, a size expression over the symbols.
    pub elems: Size,
    /// Must be zero before the first launch.
    pub zeroed: bool,
}

/// What a [`ParamKind::TensorMap`] parameter describes: a tiled TMA tensor map over input
/// `input` (dense row-major), encoded on the host with `cuTensorMapEncodeTiled` (128-byte
/// swizzle, out-of-bounds elements zero).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorMapParam {
    /// Index of the region input it maps.
    pub input: usize,
    /// The tensor's dimensions, innermost first (elements).
    pub dims: Vec<Size>,
    /// The box one load copies, innermost first (elements).
    pub box_dims: Vec<u32>,
}

/// A kernel parameter.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Param {
    /// The C identifier of the parameter.
    pub name: String,
    /// Element type (pointee type for buffers, `int` for symbols).
    pub ty: CType,
    /// Whether it is read, written or a symbol's value.
    pub kind: ParamKind,
    /// The tensor map of a [`ParamKind::TensorMap`] parameter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tmap: Option<TensorMapParam>,
    /// The size of a [`ParamKind::Workspace`] parameter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceParam>,
}

/// Launch configuration: grid as size expressions over the symbols, block constant.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Launch {
    /// Blocks per grid (x, y, z), size expressions over the symbols evaluated at launch.
    pub grid: [Size; 3],
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// Dynamic shared memory in bytes (carved from [`Smem`] buffers marked `dynamic`).
    pub dyn_smem_bytes: u32,
}

impl Launch {
    /// Threads per block.
    pub fn threads(&self) -> u32 {
        self.block.iter().product()
    }
}

/// A shared-memory buffer `ty name[d0][d1]…`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Smem {
    /// The C identifier of the buffer.
    pub name: String,
    /// Element type.
    pub ty: CType,
    /// Extents, outermost first (a `[d0][d1]…` declaration); elements = their product.
    pub dims: Vec<u64>,
    /// Carved from dynamic shared memory (at a 16-byte aligned offset) instead of static.
    pub dynamic: bool,
}

impl Smem {
    /// Bytes.
    pub fn bytes(&self) -> u64 {
        self.dims.iter().product::<u64>() * self.ty.bytes()
    }
}

/// How uniform a condition is across threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Div {
    /// The same for every thread of the block.
    Block,
    /// The same for the 32 lanes of each warp.
    Warp,
    /// May differ per thread.
    Thread,
}

/// Warp-collective reductions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WarpOp {
    /// Sum over the 32 lanes.
    Sum,
    /// Maximum over the 32 lanes.
    Max,
    /// Minimum over the 32 lanes.
    Min,
}

/// One statement.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Stmt {
    /// `// text`.
    Comment(String),
    /// `[const] ty name = value;`.
    Let {
        /// Declared type.
        ty: CType,
        /// Variable name.
        name: String,
        /// Initializer (a C expression).
        value: String,
        /// `false` declares it `const`.
        mutable: bool,
    },
    /// A register array `ty name[d0]…[dn];`, zero-initialized when `zero`.
    Array {
        /// Element type.
        ty: CType,
        /// Array name.
        name: String,
        /// Extents, outermost first.
        dims: Vec<u64>,
        /// Zero-initialize every element.
        zero: bool,
    },
    /// `place = value;` (`place` an lvalue: a variable, an array element, a shared-memory slot).
    Assign {
        /// The lvalue written.
        place: String,
        /// The C expression stored.
        value: String,
    },
    /// `vector` elements `buffer[index..index + vector)` of global memory into register array
    /// `dst`, in accesses of at most 16 bytes (`dlc_ld_vec`): the template proves `index`
    /// aligned to the access width.
    Load {
        /// Register array receiving the elements.
        dst: String,
        /// Global buffer read.
        buffer: String,
        /// Element index of the first element (a C expression, aligned to the access width).
        index: String,
        /// Element type.
        ty: CType,
        /// Number of consecutive elements loaded.
        vector: u32,
    },
    /// `buffer[index] = value;` to global memory, `value` of the buffer's type; `vector`
    /// elements at once when > 1 (`value` then names a register array of that many elements,
    /// stored in accesses of at most 16 bytes, `dlc_st_vec`, `index` aligned as for `Load`).
    Store {
        /// Global buffer written.
        buffer: String,
        /// Element index of the (first) element (a C expression).
        index: String,
        /// The value, or the register array of `vector` elements.
        value: String,
        /// Element type.
        ty: CType,
        /// Number of consecutive elements stored.
        vector: u32,
    },
    /// `for (int var = start; var < end; var += step)`.
    For {
        /// Loop variable (an `int`).
        var: String,
        /// First value (a C expression).
        start: String,
        /// Exclusive bound (a C expression).
        end: String,
        /// Increment (a C expression).
        step: String,
        /// The unroll pragma emitted before the loop.
        unroll: Unroll,
        /// How uniform the trip count is across threads (checked around barriers by the verifier).
        div: Div,
        /// The loop body.
        body: Vec<Stmt>,
    },
    /// `if (cond) {…} else {…}`.
    If {
        /// The condition (a C expression).
        cond: String,
        /// How uniform the condition is across threads.
        div: Div,
        /// Statements when the condition holds.
        then: Vec<Stmt>,
        /// Statements otherwise (empty: no `else`).
        otherwise: Vec<Stmt>,
    },
    /// `__syncthreads()`.
    Barrier,
    /// `__threadfence()` (`dlc_fence()`): this thread's global writes before it are visible
    /// to every thread of the grid before its writes after it (split-K publishes a partial
    /// tile before counting it).
    Fence,
    /// `dst = op over the warp of value` (every lane gets it).
    WarpReduce {
        /// The reduction.
        op: WarpOp,
        /// Variable receiving the result in every lane.
        dst: String,
        /// This lane's operand (a C expression).
        value: String,
    },
    /// An asynchronous global → shared copy of `bytes` (4, 8, 16) bytes, of which `src_bytes`
    /// are read (the rest zero-filled), joining the open group of load token `token`.
    CpAsync {
        /// Shared-memory destination address (a C expression).
        dst: String,
        /// Global source address (a C expression).
        src: String,
        /// Bytes copied: 4, 8 or 16.
        bytes: u32,
        /// Bytes actually read from `src` (a C expression; the rest are zero-filled, for tails).
        src_bytes: String,
        /// Load token of the group the copy joins.
        token: String,
    },
    /// `cp.async.commit_group`: closes the open group as `TokLoad` `token`.
    Commit {
        /// The load token the closed group becomes.
        token: String,
    },
    /// `cp.async.wait_group pending`: at most `pending` groups stay in flight; `tokens` are
    /// the ones this makes ready.
    Wait {
        /// The load tokens made ready by this wait.
        tokens: Vec<String>,
        /// Groups that may stay in flight after it.
        pending: u32,
    },
    /// A read of shared-memory data staged under load token `token` (a marker for the
    /// verifier; renders as nothing).
    SmemUse {
        /// The load token whose data is read.
        token: String,
    },
    /// `ldmatrix.sync.aligned.m8n8.x{num}[.trans]` into register array `dst`, each lane
    /// supplying row address `addr`.
    LdMatrix {
        /// Register array receiving the fragments.
        dst: String,
        /// Number of 8x8 matrices loaded (1, 2 or 4).
        num: u32,
        /// Transposed load (`.trans`).
        trans: bool,
        /// This lane's shared-memory row address (a C expression).
        addr: String,
        /// Load token of the staged data read (must be ready).
        token: String,
    },
    /// `mma.sync.aligned.m16n8k16.row.col.f32.{f16|bf16}`: `d = a·b + c` (register arrays),
    /// producing `TokCompute` `token`.
    Mma {
        /// `bf16` operands instead of `f16`.
        bf16: bool,
        /// Accumulator register array written.
        d: String,
        /// A fragment register array.
        a: String,
        /// B fragment register array.
        b: String,
        /// C (input accumulator) register array.
        c: String,
        /// The compute token it produces.
        token: String,
    },
    /// Epilogue applied to the accumulators in registers: needs `TokCompute` `after`, yields
    /// `TokEpilogue` `token`.
    Epilogue {
        /// The compute token that must be produced first.
        after: String,
        /// The epilogue token it produces.
        token: String,
        /// Statements over the accumulators.
        body: Vec<Stmt>,
    },
    /// A nested block `{ … }` (a scope for names).
    Block(Vec<Stmt>),
    /// One statement of the SM90 pipeline (`code;`): an mbarrier operation, a TMA load, a
    /// `wgmma` instruction or fence, or a shared-memory pointer they use (`sm90_gemm`).
    /// `warpgroup`: a warpgroup collective (`wgmma.*`, `setmaxnreg`), never under
    /// thread-divergent control.
    Sm90 {
        /// The statement's CUDA text, without the `;`.
        code: String,
        /// A warpgroup collective.
        warpgroup: bool,
    },
}

/// How a `for` loop is unrolled: the pragma [`Stmt::For`] renders before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unroll {
    /// No pragma: the compiler decides (it fully unrolls short constant trip counts).
    Compiler,
    /// `#pragma unroll`: fully unrolled (constant trip counts).
    Full,
    /// `#pragma unroll 1`: kept a loop whatever its trip count, so that the body the plan
    /// prices (registers, issued instructions) is the body that runs — a main loop of a short
    /// constant trip count fully unrolled holds every stage's loads live at once (a
    /// 255×256×768 GEMM: 190 registers instead of 68).
    Never,
    /// `#pragma unroll N`: unrolled by `N` (a serial fold's loop: [`crate::codegen::scalar`]
    /// keeps a bounded number of its iterations' loads in flight).
    By(u32),
}

impl Stmt {
    /// `for (int var = 0; var < end; ++var)`, unrolled, block-uniform.
    pub fn unrolled(var: &str, end: u64, body: Vec<Stmt>) -> Stmt {
        Stmt::For {
            var: var.into(),
            start: "0".into(),
            end: end.to_string(),
            step: "1".into(),
            unroll: Unroll::Full,
            div: Div::Block,
            body,
        }
    }

    /// `if (cond) { then }`, block-uniform, no else.
    pub fn uniform_if(cond: impl Into<String>, then: Vec<Stmt>) -> Stmt {
        Stmt::If {
            cond: cond.into(),
            div: Div::Block,
            then,
            otherwise: vec![],
        }
    }

    /// `const int name = value;`.
    pub fn int(name: &str, value: impl Into<String>) -> Stmt {
        Stmt::Let {
            ty: CType::I32,
            name: name.into(),
            value: value.into(),
            mutable: false,
        }
    }

    /// `[const] float name = value;`.
    pub fn f32(name: &str, value: impl Into<String>, mutable: bool) -> Stmt {
        Stmt::Let {
            ty: CType::F32,
            name: name.into(),
            value: value.into(),
            mutable,
        }
    }

    /// `for (int var = start; var < end; var += step) body`.
    pub fn range(
        var: &str,
        [start, end, step]: [String; 3],
        div: Div,
        unroll: Unroll,
        body: Vec<Stmt>,
    ) -> Stmt {
        Stmt::For {
            var: var.into(),
            start,
            end,
            step,
            unroll,
            div,
            body,
        }
    }
}

/// One kernel of the GPU dialect.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Kernel {
    /// The `__global__` function's name (unique in the generated file).
    pub name: String,
    /// The architecture it is generated for.
    pub arch: Arch,
    /// The template it was built from.
    pub template: String,
    /// Parameters in launch order (buffers, then symbols).
    pub params: Vec<Param>,
    /// Grid and block sizes.
    pub launch: Launch,
    /// Shared-memory buffers, static and dynamic.
    pub smem: Vec<Smem>,
    /// The kernel body.
    pub body: Vec<Stmt>,
    /// A cap on the registers per thread ptxas may allocate (`__maxnreg__`, in place of
    /// `__launch_bounds__(threads, 1)`): the register estimate of a template whose plan prices
    /// its occupancy at a count that ptxas would otherwise exceed (the row template,
    /// `plan::regs::ROW`; the SIMT contraction and the scan, their plan's estimate). `None`: the
    /// launch bounds alone.
    pub max_regs: Option<u32>,
}

impl Kernel {
    /// Static and dynamic shared memory, bytes (dynamic buffers at 16-byte aligned offsets).
    pub fn smem_bytes(&self) -> (u64, u64) {
        let mut stat = 0u64;
        let mut dynamic = 0u64;
        for s in &self.smem {
            if s.dynamic {
                dynamic = dynamic.div_ceil(16) * 16 + s.bytes();
            } else {
                stat += s.bytes().div_ceil(16) * 16;
            }
        }
        (stat, dynamic)
    }
}
