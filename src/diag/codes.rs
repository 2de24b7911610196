//! The registry of every diagnostic code (seed 001 §14): one `(code, kind)` constant per code,
//! and [`ALL`], the list tests check against `docs/diagnostics.md`. A code keeps its meaning
//! forever; a new problem gets a new code here, with a row in the docs. Code outside this file
//! names codes by these constants, never by string literals (a test scans the sources).

/// A diagnostic code and its kind's name: `("E0002", "UnknownOp")`.
pub type Code = (&'static str, &'static str);

/// Declares the code constants and [`ALL`].
macro_rules! codes {
    ($($(#[$doc:meta])* $name:ident = $code:literal $kind:ident;)*) => {
        $($(#[$doc])* pub const $name: Code = ($code, stringify!($kind));)*
        /// Every code, in the order of the registry.
        pub const ALL: &[Code] = &[$($name),*];
    };
}

codes! {
    // Document and JSON (`E00xx`).
    /// `E0000` UnreadableInput: the graph file cannot be read
    UNREADABLE_INPUT = "E0000" UnreadableInput;
    /// `E0001` MalformedJson: the text is not JSON; line and column of the error
    MALFORMED_JSON = "E0001" MalformedJson;
    /// `E0002` UnknownOp: `op` is not in the op table; suggests the closest name
    UNKNOWN_OP = "E0002" UnknownOp;
    /// `E0003` UnknownAttribute: an attribute the op does not have (all are reported); suggests the
    /// closest
    UNKNOWN_ATTRIBUTE = "E0003" UnknownAttribute;
    /// `E0004` UnknownDtype: a dtype name other than `fp16 bf16 fp32 i32 bool`
    UNKNOWN_DTYPE = "E0004" UnknownDtype;
    /// `E0005` InvalidField: wrong JSON type, missing required field or attribute, bad value
    /// (negative size, stride 0, duplicate axis, scalar operand outside Elementwise, unknown field,
    /// …)
    INVALID_FIELD = "E0005" InvalidField;
    /// `E0006` InvalidConstant: a `constants` entry that is malformed, not a signature input, or
    /// whose count, shape or dtype does not fit its tensor
    INVALID_CONSTANT = "E0006" InvalidConstant;
    /// `E0007` UnreadableConstant: the `.safetensors` file a constant names cannot be read or
    /// decoded, or lacks the key
    UNREADABLE_CONSTANT = "E0007" UnreadableConstant;
    // Graph structure (`E01xx`).
    /// `E0101` UndeclaredTensor: a signature input or output is not declared in `tensors`
    UNDECLARED_TENSOR = "E0101" UndeclaredTensor;
    /// `E0102` DoublyProducedTensor: a tensor has two producers (two nodes, or a node and the
    /// signature)
    DOUBLY_PRODUCED_TENSOR = "E0102" DoublyProducedTensor;
    /// `E0103` DanglingReference: a node reads a tensor nobody produces; suggests the closest name
    DANGLING_REFERENCE = "E0103" DanglingReference;
    /// `E0104` Cycle: the nodes do not form a DAG; names a node on the cycle and the cycle
    CYCLE = "E0104" Cycle;
    /// `E0105` DuplicateNodeName: two nodes share a `name`
    DUPLICATE_NODE_NAME = "E0105" DuplicateNodeName;
    /// `E0106` UnproducedTensor: a signature output (or a declared tensor) that no node produces
    UNPRODUCED_TENSOR = "E0106" UnproducedTensor;
    // Symbols and sizes (`E02xx`).
    /// `E0201` UnboundSymbol: at `run`, a symbol used by a tensor has no value (CLI, arrays,
    /// `symbols`)
    UNBOUND_SYMBOL = "E0201" UnboundSymbol;
    /// `E0202` ConflictingSymbolBinding: two arrays, or `--bind` and an array, give one symbol
    /// different values
    CONFLICTING_SYMBOL_BINDING = "E0202" ConflictingSymbolBinding;
    /// `E0203` ShapeOverflow: a tensor's element count does not fit i64 (constant shape on load, or
    /// after binding)
    SHAPE_OVERFLOW = "E0203" ShapeOverflow;
    /// `E0204` UnknownSymbol: `--bind` names a symbol no tensor uses; suggests the closest
    UNKNOWN_SYMBOL = "E0204" UnknownSymbol;
    /// `E0205` NegativeSize: a negative `--bind` value, or an axis that becomes negative after
    /// binding (e.g. a cropping Pad of a too-small axis)
    NEGATIVE_SIZE = "E0205" NegativeSize;
    /// `E0206` InvalidBoundShape: evaluator: with the bound symbol values, a size rule that could not
    /// be proven symbolically fails (SHRINK bounds, GATHER sizes, negative size)
    INVALID_BOUND_SHAPE = "E0206" InvalidBoundShape;
    /// `E0207` ViewOutOfBounds: evaluator: with the bound symbol values, a VIEW's index map leaves
    /// its input
    VIEW_OUT_OF_BOUNDS = "E0207" ViewOutOfBounds;
    /// `E0208` TensorTooLarge: evaluator: a buffer of that many elements cannot be allocated
    TENSOR_TOO_LARGE = "E0208" TensorTooLarge;
    /// `E0209` ReadOutOfBounds: evaluator: a READ's index map, where its guard holds, leaves its
    /// operand with the bound symbol values
    READ_OUT_OF_BOUNDS = "E0209" ReadOutOfBounds;
    // `run` inputs, outputs and evaluation (`E03xx`).
    /// `E0300` NpyUnreadable: an input file is missing, unreadable, truncated or not `.npy`
    NPY_UNREADABLE = "E0300" NpyUnreadable;
    /// `E0301` NpyDtypeMismatch: an array's element type does not fit its tensor's dtype (floats take
    /// `<f4`/`<f2`, i32 `<i4`, bool `\|b1`)
    NPY_DTYPE_MISMATCH = "E0301" NpyDtypeMismatch;
    /// `E0302` NpyShapeMismatch: an input array's rank or a constant axis differs from the declared
    /// shape
    NPY_SHAPE_MISMATCH = "E0302" NpyShapeMismatch;
    /// `E0303` MissingInput: a signature input has no value (`--input` not given and no `--random`)
    MISSING_INPUT = "E0303" MissingInput;
    /// `E0304` GatherIndexOutOfRange: a Gather index value outside `[0, size)` along the axis
    GATHER_INDEX_OUT_OF_RANGE = "E0304" GatherIndexOutOfRange;
    /// `E0305` DivisionByZero: i32 `div` by zero
    DIVISION_BY_ZERO = "E0305" DivisionByZero;
    /// `E0306` EvaluatorInternal: internal: an evaluator invariant failed
    EVALUATOR_INTERNAL = "E0306" EvaluatorInternal;
    /// `E0307` InputShapeMismatch: library use: a tensor passed to `eval::evaluate` does not have its
    /// INPUT's bound shape
    INPUT_SHAPE_MISMATCH = "E0307" InputShapeMismatch;
    /// `E0308` InputDtypeMismatch: library use: a tensor passed to `eval::evaluate` does not have its
    /// INPUT's dtype
    INPUT_DTYPE_MISMATCH = "E0308" InputDtypeMismatch;
    /// `E0309` UnknownInput: `--input` names a tensor that is not a signature input
    UNKNOWN_INPUT = "E0309" UnknownInput;
    /// `E0310` InvalidInputArgument: `--input` is not `TENSOR=FILE`, or names a tensor twice
    INVALID_INPUT_ARGUMENT = "E0310" InvalidInputArgument;
    /// `E0311` InvalidBindArgument: `--bind` is not `SYMBOL=INTEGER`, or binds a symbol twice
    INVALID_BIND_ARGUMENT = "E0311" InvalidBindArgument;
    /// `E0312` OutputWriteFailed: the output directory or an output file cannot be written
    OUTPUT_WRITE_FAILED = "E0312" OutputWriteFailed;
    /// `E0313` InvalidArgument: any other malformed command line (unknown flag, bad `--dump` layer,
    /// …)
    INVALID_ARGUMENT = "E0313" InvalidArgument;
    /// `E0314` UnresolvedSize: a signature tensor's size cannot be computed (unbound symbol,
    /// overflow)
    UNRESOLVED_SIZE = "E0314" UnresolvedSize;
    /// `E0315` OutputNotComputed: internal: the evaluator returned no value for an output
    OUTPUT_NOT_COMPUTED = "E0315" OutputNotComputed;
    /// `E0316` OutputMismatch: internal: an output's dtype or shape is not the declared one
    OUTPUT_MISMATCH = "E0316" OutputMismatch;
    /// `E0317` OptimizerFailed: internal: `run --optimized` could not optimize the graph (no kernel
    /// cover, or a kernel no region can express)
    OPTIMIZER_FAILED = "E0317" OptimizerFailed;
    // Devices (`E04xx`).
    /// `E0400` DeviceUnavailable: `--device cuda` on a machine without a CUDA driver library, without
    /// a GPU, with a GPU that is neither 8.x nor 9.x, or without NVRTC; `why` says which
    DEVICE_UNAVAILABLE = "E0400" DeviceUnavailable;
    /// `E0401` CodegenFailed: internal: `--device cuda` could not emit a kernel of the optimized
    /// program as CUDA
    CODEGEN_FAILED = "E0401" CodegenFailed;
    /// `E0402` CudaCompileFailed: internal: NVRTC rejected the emitted CUDA (compile error, register
    /// spill, static shared memory over 48 KiB) or a launch exceeds the GPU's limits (shared memory
    /// per block, threads, registers)
    CUDA_COMPILE_FAILED = "E0402" CudaCompileFailed;
    /// `E0403` CudaRunFailed: internal: a CUDA driver call or a kernel failed, or the kernels
    /// manifest is inconsistent
    CUDA_RUN_FAILED = "E0403" CudaRunFailed;
    /// `E0404` GridLimitExceeded: `--device cuda`: a launch's grid, evaluated at the bound sizes,
    /// exceeds the GPU's limits (x ≤ 2³¹−1, y and z ≤ 65535); checked before anything is allocated or
    /// launched (`codegen::gpu::verify::check_grid`, also in the CPU emulation host)
    GRID_LIMIT_EXCEEDED = "E0404" GridLimitExceeded;
    /// `E0405` DeviceMemoryExceeded: `optimize`: the graph's signature inputs and outputs, at their
    /// concrete sizes (`symbols` defaults), need more than the 80 GiB of the GPUs planned for — a
    /// limit no template can avoid; names the largest tensor
    /// (`codegen::gpu::verify::check_device_memory`)
    DEVICE_MEMORY_EXCEEDED = "E0405" DeviceMemoryExceeded;
    // Shape sets and the plan cache (`E05xx`).
    /// `E0500` InvalidShapeSet: `optimize --shape-set` is not `SYMBOL=V1,V2,...` with sizes ≥ 0, or
    /// names a symbol no tensor of the graph uses (`src/shapes/`)
    INVALID_SHAPE_SET = "E0500" InvalidShapeSet;
    /// `E0501` BindingOutsideCluster: a binding is not a multiple of the factor a shape cluster's
    /// specialization (`T = d*T_d`) needs
    BINDING_OUTSIDE_CLUSTER = "E0501" BindingOutsideCluster;
    /// `E0502` PlanCacheUnwritable: the `--plan-cache` directory or one of its entries cannot be
    /// written
    PLAN_CACHE_UNWRITABLE = "E0502" PlanCacheUnwritable;
    // ONNX import (`E06xx`).
    /// `E0600` OnnxUnreadable: an `.onnx` model, a tensor file or an external-data file cannot be
    /// read or decoded
    ONNX_UNREADABLE = "E0600" OnnxUnreadable;
    /// `E0601` OnnxUnsupportedOps: one diagnostic listing every ONNX node that cannot be imported,
    /// with node name, op and opset (also: opset < 13)
    ONNX_UNSUPPORTED_OPS = "E0601" OnnxUnsupportedOps;
    /// `E0602` OnnxInvalid: the model breaks ONNX's rules (bad axis, operands that do not broadcast,
    /// no graph)
    ONNX_INVALID = "E0602" OnnxInvalid;
    /// `E0603` OnnxValueOutOfRange: an int64 constant that must narrow to i32 does not fit
    ONNX_VALUE_OUT_OF_RANGE = "E0603" OnnxValueOutOfRange;
    /// `E0604` OnnxUnsupportedDtype: a graph input or output of an element type graph.json lacks
    /// (float64, int8, strings, ...)
    ONNX_UNSUPPORTED_DTYPE = "E0604" OnnxUnsupportedDtype;
    // The DSL (`E07xx`).
    /// `E0700` DslSyntax: a `.graph` program (seed 004 DSL, `src/dsl/`) has a token the grammar does
    /// not allow there, an unknown character or a malformed number
    DSL_SYNTAX = "E0700" DslSyntax;
    /// `E0701` ReservedWord: a reserved word (`graph return fused fused_reduce fused_cumulative true
    /// false`) names a graph, variable, input, output or shape variable
    RESERVED_WORD = "E0701" ReservedWord;
    /// `E0702` UndefinedName: a variable is read before it is assigned; suggests the closest name
    UNDEFINED_NAME = "E0702" UndefinedName;
    /// `E0703` UnknownFunction: a call of a name that is neither a graph of the program nor a
    /// builtin; suggests the closest
    UNKNOWN_FUNCTION = "E0703" UnknownFunction;
    /// `E0704` MissingMain: the program has no `graph main`
    MISSING_MAIN = "E0704" MissingMain;
    /// `E0705` DuplicateDefinition: a graph, input, output or shape variable defined twice, or an
    /// output named like an input it is not
    DUPLICATE_DEFINITION = "E0705" DuplicateDefinition;
    /// `E0706` UndeclaredShapeVariable: a shape variable used without a `graph<…>` declaration, or
    /// one a subgraph call leaves without a value (not bound by the arguments, no default)
    UNDECLARED_SHAPE_VARIABLE = "E0706" UndeclaredShapeVariable;
    /// `E0707` RecursionTooDeep: subgraph calls nest deeper than `--max-depth` (default 10): endless
    /// recursion, or a deep call chain; `call_chain` lists the calls
    RECURSION_TOO_DEEP = "E0707" RecursionTooDeep;
    /// `E0708` ArityMismatch: a call with the wrong number of arguments, a destructuring of the wrong
    /// number of names, a `return` of the wrong number of values
    ARITY_MISMATCH = "E0708" ArityMismatch;
    /// `E0709` TypeMismatch: a subgraph argument or result whose dtype or shape differs from the
    /// declared type (shape variables unified across the arguments)
    TYPE_MISMATCH = "E0709" TypeMismatch;
    /// `E0710` ImplicitBroadcast: seed 004's shape rule: tensor operands of an elementwise op have
    /// different shapes and neither is a scalar
    IMPLICIT_BROADCAST = "E0710" ImplicitBroadcast;
    /// `E0711` ScalarOnlyExpression: a scalar literal where a tensor is needed (subgraph input or
    /// result, `main` output, non-elementwise op), or `true`/`false` as an operand
    SCALAR_ONLY_EXPRESSION = "E0711" ScalarOnlyExpression;
    /// `E0712` InvalidKeywordArgument: a keyword argument repeated, given to a subgraph or an
    /// elementwise function, or followed by a positional one; a qualifier (`param`, `mutable`,
    /// `const_pool`) outside `main`'s inputs
    INVALID_KEYWORD_ARGUMENT = "E0712" InvalidKeywordArgument;
    /// `E0713` MissingReturn: a graph body without a `return`, or a statement after it
    MISSING_RETURN = "E0713" MissingReturn;
    /// `E0714` ComplexShapeBinding: a subgraph's `shape=[…]` uses a shape variable bound to a
    /// computed size (`2*M`), which an attribute cannot hold
    COMPLEX_SHAPE_BINDING = "E0714" ComplexShapeBinding;
    /// `E0720` Undecompilable: `decompile` cannot write the graph in the DSL: an implicit broadcast
    /// to a computed size (no `expand` spelling), a reshape with two computed sizes, a slice bound
    /// that is no clamped integer
    UNDECOMPILABLE = "E0720" Undecompilable;
    // The native CPU backend (`E08xx`).
    /// `E0800` CCompilerMissing: `run --device cpu` finds no C compiler (`$DLC_CC`, else `cc`, `gcc`,
    /// `clang` on `PATH`); names what to install (`src/cpu/build.rs`)
    C_COMPILER_MISSING = "E0800" CCompilerMissing;
    /// `E0801` CCompileFailed: internal: the C compiler rejected the generated native program (its
    /// stderr, the source kept in the cache directory)
    C_COMPILE_FAILED = "E0801" CCompileFailed;
    /// `E0802` SharedObjectLoadFailed: internal: the compiled shared object does not load, or lacks a
    /// kernel
    SHARED_OBJECT_LOAD_FAILED = "E0802" SharedObjectLoadFailed;
    /// `E0803` NativeGatherOutOfRange: `run --device cpu`: a Gather index is outside the gathered
    /// axis at run time (the reference's `E1220`)
    NATIVE_GATHER_OUT_OF_RANGE = "E0803" NativeGatherOutOfRange;
    /// `E0804` NativeOutOfMemory: `run --device cpu`: a kernel's scratch buffers (per-thread let
    /// rows, packed GEMM panels) cannot be allocated
    NATIVE_OUT_OF_MEMORY = "E0804" NativeOutOfMemory;
    /// `E0805` NativeCodegenFailed: internal: a region of the optimized program cannot be emitted as
    /// C
    NATIVE_CODEGEN_FAILED = "E0805" NativeCodegenFailed;
    /// `E0806` NativeUnboundSymbol: internal: a symbol or buffer of the native program has no value
    /// at run time
    NATIVE_UNBOUND_SYMBOL = "E0806" NativeUnboundSymbol;
    /// `E0807` NativeCacheFailed: the native cache directory (`<plan-cache>/native`, else the
    /// temporary directory) cannot be created or written
    NATIVE_CACHE_FAILED = "E0807" NativeCacheFailed;
    /// `E0808` CpuCostFileInvalid: the CPU cost-parameter file (`$DLC_CPU_COST`, else `cpu-cost.json`
    /// in the native cache directory) cannot be read or written, or is not a JSON object of four
    /// positive numbers (`src/cpu/calibrate.rs`)
    CPU_COST_FILE_INVALID = "E0808" CpuCostFileInvalid;
    /// `E0809` PerfLogInvalid: the measurement log (`$DLC_CPU_LOG`, else `perf-log.csv` in the native
    /// cache directory) cannot be read or appended to, or `calibrate LOG` finds a malformed row
    PERF_LOG_INVALID = "E0809" PerfLogInvalid;
    /// `E0810` CalibrationTooFewRows: `calibrate LOG`: fewer than 2 timed kernel rows
    CALIBRATION_TOO_FEW_ROWS = "E0810" CalibrationTooFewRows;
    // Shape and dtype rules, shared with Tiny IR (`E10xx`).
    /// `E1001` BroadcastMismatch: operand shapes do not broadcast (right-aligned, equal or 1); also
    /// GEMM C / Attention mask that would grow the result
    BROADCAST_MISMATCH = "E1001" BroadcastMismatch;
    /// `E1002` AxisSizeMismatch: sizes that must agree do not: reshape element count or `-1`,
    /// MatMul/GEMM K, conv channels, bias/gamma shapes, Concat axes, declared vs inferred shape, conv
    /// output < 1, …
    AXIS_SIZE_MISMATCH = "E1002" AxisSizeMismatch;
    /// `E1003` InvalidPermutation: `perm` is not a permutation of `0..rank`
    INVALID_PERMUTATION = "E1003" InvalidPermutation;
    /// `E1004` AxisOutOfRange: an axis outside `[-rank, rank)`
    AXIS_OUT_OF_RANGE = "E1004" AxisOutOfRange;
    /// `E1005` WrongInputCount: the op takes a different number of inputs
    WRONG_INPUT_COUNT = "E1005" WrongInputCount;
    /// `E1006` DtypeMismatch: operands' dtypes differ (no implicit promotion), `where` cond not bool,
    /// Gather index not i32, declared dtype differs from inferred
    DTYPE_MISMATCH = "E1006" DtypeMismatch;
    /// `E1007` InvalidExpand: Expand changes a non-1 axis, drops axes, or uses -1 for a new axis
    INVALID_EXPAND = "E1007" InvalidExpand;
    /// `E1008` IndexOutOfBounds: Tiny IR: an index provably leaves its tensor
    INDEX_OUT_OF_BOUNDS = "E1008" IndexOutOfBounds;
    /// `E1009` AccDtypeMissing: Tiny IR: a reduce without an accumulation dtype
    ACC_DTYPE_MISSING = "E1009" AccDtypeMissing;
    /// `E1010` MalformedTiny: Tiny IR: a malformed node (wrong operand count or attribute for its op)
    MALFORMED_TINY = "E1010" MalformedTiny;
    /// `E1011` RankMismatch: an operand has the wrong rank for the op
    RANK_MISMATCH = "E1011" RankMismatch;
    /// `E1012` SymbolicHeadDim: Attention without `scale` and a head dim D that is not a positive
    /// constant
    SYMBOLIC_HEAD_DIM = "E1012" SymbolicHeadDim;
    /// `E1013` UnsupportedDtype: a float-only op on i32/bool, or arithmetic on bool
    UNSUPPORTED_DTYPE = "E1013" UnsupportedDtype;
    // Lowering (`E11xx`).
    /// `E1100` UnsupportedLowering: a valid graph that lowering cannot express yet
    UNSUPPORTED_LOWERING = "E1100" UnsupportedLowering;
    // Regions and region programs (`E12xx`), Poly-View (`E1203`).
    /// `E1200` InvalidRegion: a Region document does not have the seed 001 §6.8 form
    REGION_INVALID_REGION = "E1200" InvalidRegion;
    /// `E1201` DuplicateName: a name (iter, input, output, let) is declared twice
    REGION_DUPLICATE_NAME = "E1201" DuplicateName;
    /// `E1202` UndefinedLet: a let is used before it is defined
    REGION_UNDEFINED_LET = "E1202" UndefinedLet;
    /// `E1203` MissingDivGuard: an index computed with an integer division, not lowered to `floordiv`
    /// + guard, so the view cannot express it affinely (listed in `--dump poly_view`'s `diagnostics`)
    REGION_MISSING_DIV_GUARD = "E1203" MissingDivGuard;
    /// `E1204` AxisAlignmentMismatch: a read's map length differs from the input's rank
    REGION_READ_RANK_MISMATCH = "E1204" AxisAlignmentMismatch;
    /// `E1205` UnboundAxis: a name in an index is neither an axis in scope nor a size symbol
    REGION_UNBOUND_AXIS = "E1205" UnboundAxis;
    /// `E1206` NonAffineMap: an index is not affine + floordiv by a positive constant
    REGION_NON_AFFINE_MAP = "E1206" NonAffineMap;
    /// `E1207` ReduceExtentUnknown: a reduce axis has no extent (no `extents`, iter or direct read)
    REGION_REDUCE_EXTENT_UNKNOWN = "E1207" ReduceExtentUnknown;
    /// `E1208` AccDtypeMissing: a reduce has no accumulation `dtype`
    REGION_ACC_DTYPE_MISSING = "E1208" AccDtypeMissing;
    /// `E1209` UnguardedAccess: a read can leave its input and no enclosing `select` prevents it
    REGION_UNGUARDED_ACCESS = "E1209" UnguardedAccess;
    /// `E1210` BroadcastMismatch: a `BroadcastInDim` operand does not fit its result shape
    REGION_BROADCAST_MISMATCH = "E1210" BroadcastMismatch;
    /// `E1211` AxisAlignmentMismatch: bad `broadcast_dimensions` or `permutation`
    REGION_AXIS_ALIGNMENT_MISMATCH = "E1211" AxisAlignmentMismatch;
    /// `E1212` NeutralInvalid: a reduce body's guard else-value is not the op's identity
    REGION_NEUTRAL_INVALID = "E1212" NeutralInvalid;
    /// `E1213` BadYield: yield from a non-let, to a non-output, or an output yielded ≠ once
    REGION_BAD_YIELD = "E1213" BadYield;
    /// `E1214` OutputShapeMismatch: an output's shape differs from the iteration space
    REGION_OUTPUT_SHAPE_MISMATCH = "E1214" OutputShapeMismatch;
    /// `E1215` YieldDtypeMismatch: a yield's cast differs from the output's dtype
    REGION_YIELD_DTYPE_MISMATCH = "E1215" YieldDtypeMismatch;
    /// `E1216` IterSizeMissing: an iter has no size and no output gives one
    REGION_ITER_SIZE_MISSING = "E1216" IterSizeMissing;
    /// `E1217` UnknownTensor: a read names something that is not a region input
    REGION_UNKNOWN_TENSOR = "E1217" UnknownTensor;
    /// `E1220` UnguardedAccess: run time: an out-of-bounds read (an error, never a panic)
    REGION_OUT_OF_BOUNDS = "E1220" UnguardedAccess;
    /// `E1221` UnboundSymbol: run time: a region symbol has no value
    REGION_UNBOUND_SYMBOL = "E1221" UnboundSymbol;
    /// `E1222` InputMismatch: run time: a missing input, or one with the wrong dtype or shape
    REGION_INPUT_MISMATCH = "E1222" InputMismatch;
    /// `E1223` BadSize: run time: a size is negative or too large
    REGION_BAD_SIZE = "E1223" BadSize;
    /// `E1230` UndefinedBuffer: a step reads (or an output names) a buffer no input, region or alias
    /// defined before
    UNDEFINED_BUFFER = "E1230" UndefinedBuffer;
    /// `E1231` BufferRedefined: two definitions of one buffer (inputs, region outputs, aliases)
    BUFFER_REDEFINED = "E1231" BufferRedefined;
    /// `E1232` BufferMismatch: a region input or alias disagrees with its buffer's dtype or shape
    BUFFER_MISMATCH = "E1232" BufferMismatch;
    /// `E1233` AliasSizeMismatch: an alias changes the element count of the buffer it reshapes
    ALIAS_SIZE_MISMATCH = "E1233" AliasSizeMismatch;
    // Extraction (`E13xx`), Poly-View (`E1304`).
    /// `E1300` InvalidEGraph: `extract`: an egraph-serialize document that is not an extraction
    /// problem: a child that is not a node id, a root e-class without e-nodes, no root, a negative
    /// cost
    INVALID_EGRAPH = "E1300" InvalidEGraph;
    /// `E1301` NoFiniteExtraction: `extract`: a root e-class has no finite acyclic term (every e-node
    /// needs an infinite-cost e-node or a cycle)
    NO_FINITE_EXTRACTION = "E1301" NoFiniteExtraction;
    /// `E1302` ExtractionTimeout: `extract --extractor exact`: the time limit passed before any valid
    /// extraction (only without the fast warm start, library use)
    EXTRACTION_TIMEOUT = "E1302" ExtractionTimeout;
    /// `E1303` SolverFailed: internal: the ILP solver failed numerically and no valid extraction was
    /// at hand
    SOLVER_FAILED = "E1303" SolverFailed;
    /// `E1304` AxisAlignmentMismatch: an iter size disagrees with the output's shape, or an unguarded
    /// access provably leaves its tensor (listed in `--dump poly_view`'s `diagnostics`)
    AXIS_ALIGNMENT_MISMATCH = "E1304" AxisAlignmentMismatch;
    // Resource budgets (`E14xx`).
    /// `E1400` InputFileTooLarge: a graph file (any command) or `.npy` input (`run`) holds more than
    /// `--max-file-bytes` (default 1 GiB); found reading at most one byte past the budget
    INPUT_FILE_TOO_LARGE = "E1400" InputFileTooLarge;
    /// `E1401` TooManyNodes: the graph has more nodes than `--max-nodes` (default 20,000)
    TOO_MANY_NODES = "E1401" TooManyNodes;
    /// `E1402` TooManyConcatInputs: a `Concat` has more inputs than `--max-concat-inputs` (default
    /// 256)
    TOO_MANY_CONCAT_INPUTS = "E1402" TooManyConcatInputs;
    /// `E1403` RankTooLarge: a tensor's rank exceeds `--max-rank` (default 16)
    RANK_TOO_LARGE = "E1403" RankTooLarge;
    /// `E1404` TensorOverBudget: `run`: a value of the program at the binding (input, intermediate,
    /// output) needs more than `--max-tensor-bytes` (default 4 GiB); checked before anything is
    /// computed
    TENSOR_OVER_BUDGET = "E1404" TensorOverBudget;
    /// `E1405` MemoryOverBudget: `run`: the values alive at once at the binding exceed `--max-memory`
    /// (default 16 GiB); `optimize`: its estimate (256 KiB per Tiny IR node, 4 MiB per Concat input)
    /// exceeds `--max-memory` (default 16 GiB)
    MEMORY_OVER_BUDGET = "E1405" MemoryOverBudget;
    /// `E1406` NpyHeaderTooLong: a `.npy` header length field over 64 KiB (or past the end of the
    /// file)
    NPY_HEADER_TOO_LONG = "E1406" NpyHeaderTooLong;
    /// `E1407` AllocationFailed: a buffer sized by the input (an output `.npy` file, a random input,
    /// a side file) could not be allocated
    ALLOCATION_FAILED = "E1407" AllocationFailed;
    /// `E1408` SizeBeyondTarget: a tensor of more than 2^48 elements, or signature tensors over the
    /// GPUs' 80 GiB, at the binding being compiled (`optimize`, `optimize --shape-set`, `run
    /// --optimized`, `run --device cuda`); for the two `run`s also an axis longer than 2^32 − 1, even
    /// in a tensor with no element
    SIZE_BEYOND_TARGET = "E1408" SizeBeyondTarget;
    /// `E1409` ExternalDataOverBudget: ONNX external data for one tensor larger than the file budget
    /// (`--max-file-bytes`)
    EXTERNAL_DATA_OVER_BUDGET = "E1409" ExternalDataOverBudget;
    // Rule sets (`E15xx`).
    /// `E1500` IllTypedRule: a rule builds a term Tiny IR rejects (an ill-typed right-hand side)
    ILL_TYPED_RULE = "E1500" IllTypedRule;
    /// `E1501` UnsoundRule: a rule's sides disagree in dtype or shape on a checked instance (unsound)
    UNSOUND_RULE = "E1501" UnsoundRule;
    /// `E1502` UnknownPhase: a rule set names a phase that does not exist
    UNKNOWN_PHASE = "E1502" UnknownPhase;
    /// `E1503` DuplicatePhase: a rule set adds a phase whose name is already taken
    DUPLICATE_PHASE = "E1503" DuplicatePhase;
    // Warnings (`W2xxx`).
    /// `W2101` ExcessivePiecewise: a guard expands to more than `poly::affine::PIECEWISE_BUDGET` (64)
    /// pieces (the statement becomes non-SCoP), or an engine operation answers `PiecewiseOverBudget`
    /// (listed in `--dump poly_view` / `poly_core` `diagnostics`)
    EXCESSIVE_PIECEWISE = "W2101" ExcessivePiecewise;
    // Internal errors (`E9xxx`).
    /// `E9000` InternalError: internal: a compiler bug (a panic caught by the CLI, or a broken
    /// invariant)
    INTERNAL_ERROR = "E9000" InternalError;
}

/// Reference-evaluator codes that are the input's fault even on inputs already validated
/// (`run::prepare_inputs` checks names, dtypes and shapes): a Gather index out of range (a data
/// value), a READ that leaves its operand under the bound symbol values, a tensor too large to
/// allocate. Any other evaluator error on validated inputs is a compiler bug, `MISSING_INPUT`
/// and `INPUT_SHAPE_MISMATCH` included: validation rejects both before the evaluator runs, so
/// the evaluator raising them means the two disagree. `run --optimized` classifies a failure of
/// the optimized program by it, and so does the fuzz target.
pub const EVAL_USER_ERRORS: &[Code] = &[
    GATHER_INDEX_OUT_OF_RANGE,
    TENSOR_TOO_LARGE,
    READ_OUT_OF_BOUNDS,
    ALLOCATION_FAILED,
];

/// Whether `code` is one of [`EVAL_USER_ERRORS`].
pub fn is_eval_user_error(code: &str) -> bool {
    EVAL_USER_ERRORS.iter().any(|c| c.0 == code)
}

#[cfg(test)]
mod tests {
    use super::ALL;
    use std::collections::BTreeMap;
    use std::path::Path;

    /// `code -> kind` of the table in `docs/diagnostics.md`.
    fn documented() -> BTreeMap<String, String> {
        let doc = include_str!("../../docs/diagnostics.md");
        doc.lines()
            .filter_map(|l| {
                let mut cells = l.split('|').map(str::trim).skip(1);
                let (code, kind) = (cells.next()?, cells.next()?);
                let is_code = code.len() == 5
                    && (code.starts_with('E') || code.starts_with('W'))
                    && code[1..].bytes().all(|b| b.is_ascii_digit());
                is_code.then(|| (code.to_string(), kind.to_string()))
            })
            .collect()
    }

    #[test]
    fn evaluator_user_errors_are_registered_and_exclude_validated_inputs() {
        use super::{is_eval_user_error, EVAL_USER_ERRORS};
        for c in EVAL_USER_ERRORS {
            assert!(ALL.contains(c), "{c:?} is not in the registry");
            assert!(is_eval_user_error(c.0));
        }
        assert!(is_eval_user_error(super::GATHER_INDEX_OUT_OF_RANGE.0));
        for c in [
            super::MISSING_INPUT,
            super::INPUT_SHAPE_MISMATCH,
            super::INTERNAL_ERROR,
        ] {
            assert!(!is_eval_user_error(c.0), "{c:?}");
        }
    }

    #[test]
    fn every_code_is_declared_once_and_well_formed() {
        let mut seen = BTreeMap::new();
        for &(code, kind) in ALL {
            assert!(seen.insert(code, kind).is_none(), "{code} declared twice");
            assert!(code.len() == 5 && code[1..].bytes().all(|b| b.is_ascii_digit()));
            assert!(
                kind.chars().next().is_some_and(|c| c.is_ascii_uppercase()),
                "{kind}"
            );
        }
    }

    #[test]
    fn the_registry_and_the_documentation_agree() {
        let doc = documented();
        let reg: BTreeMap<String, String> = ALL
            .iter()
            .map(|&(c, k)| (c.to_string(), k.to_string()))
            .collect();
        let undocumented: Vec<_> = reg.keys().filter(|c| !doc.contains_key(*c)).collect();
        let unregistered: Vec<_> = doc.keys().filter(|c| !reg.contains_key(*c)).collect();
        assert!(
            undocumented.is_empty(),
            "codes without a row in docs/diagnostics.md: {undocumented:?}"
        );
        assert!(
            unregistered.is_empty(),
            "documented codes missing from the registry: {unregistered:?}"
        );
        for (code, kind) in &reg {
            assert_eq!(&doc[code], kind, "{code}: the docs name another kind");
        }
    }

    /// The part of a source file before its inline test module (tests may spell codes out: they
    /// check the stable contract).
    fn non_test_part(text: &str) -> &str {
        let mut end = text.len();
        for marker in [
            "#[cfg(test)]\nmod ",
            "#[cfg(test)]\npub mod ",
            "#[cfg(test)]\npub(crate) mod ",
        ] {
            for (i, _) in text.match_indices(marker) {
                let rest = &text[i + marker.len()..];
                // `#[cfg(test)] mod tests;` points at a file of its own: not a module body.
                let decl = rest.split(['{', ';']).next().unwrap_or("");
                if rest[decl.len()..].starts_with('{') {
                    end = end.min(i);
                }
            }
        }
        &text[..end]
    }

    fn literal_codes(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("src is readable") {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                literal_codes(&path, out);
                continue;
            }
            let skip = name == "codes.rs" || name == "tests.rs" || name.ends_with("_tests.rs");
            if !name.ends_with(".rs") || skip {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("source is UTF-8");
            for (i, line) in non_test_part(&text).lines().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") {
                    continue;
                }
                let bytes = line.as_bytes();
                for (j, w) in bytes.windows(7).enumerate() {
                    let digits = w[2..6].iter().all(u8::is_ascii_digit);
                    if w[0] == b'"' && (w[1] == b'E' || w[1] == b'W') && digits && w[6] == b'"' {
                        out.push(format!("{}:{}:{}", path.display(), i + 1, j + 1));
                    }
                }
            }
        }
    }

    #[test]
    fn code_outside_the_registry_names_codes_by_constant() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut found = Vec::new();
        literal_codes(&src, &mut found);
        assert!(
            found.is_empty(),
            "diagnostic codes written as string literals (use crate::diag::codes): {found:?}"
        );
    }

    #[test]
    fn the_literal_scan_finds_literals_outside_tests_and_comments_only() {
        let dir = std::env::temp_dir().join(format!("dlc-codes-scan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("a.rs");
        let quiet = "// Diagnostic::error(\"E0001\", ..)\n#[cfg(test)]\nmod tests;\n\
                     #[cfg(test)]\nmod t {\n    const C: &str = \"E0002\";\n}\n";
        std::fs::write(&file, quiet).expect("write");
        let mut found = Vec::new();
        literal_codes(&dir, &mut found);
        assert!(found.is_empty(), "{found:?}");
        std::fs::write(
            &file,
            format!("fn f() -> &'static str {{ \"W2101\" }}\n{quiet}"),
        )
        .expect("write");
        literal_codes(&dir, &mut found);
        std::fs::remove_dir_all(&dir).expect("clean up");
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("a.rs:1:26"), "{found:?}");
    }
}
