//! Software prefetch of the next rows in a row kernel (softmax, LayerNorm: an outer loop over
//! rows, several passes over each row).
//!
//! A row kernel's first pass over a row (the max or mean reduce) reads it from memory and
//! waits for it: the hardware prefetchers restart at each 4 KiB page, and a `[*, 1024]` fp32
//! row is one page. The later passes (the exponentials, the normalization) compute on the
//! L1-resident row and leave the memory idle. So the first pointwise loop over the row is
//! strip-mined ([`PF_STRIP`] elements) and each strip prefetches the same stretch of the row
//! `dlc_pfr` rows ahead (at least [`PF_MIN_BYTES`]): the next row's loads overlap this row's arithmetic.
//! Measured on Intel Emerald Rapids (softmax `[8192, 1024]`, the emitted kernel in a C
//! harness, CPU-time minima, loaded machine): 1 thread 9.2–11.9 → 7.6–8.2 ms, 2 threads
//! (both threads' CPU time) 9.4–13.8 → 7.8–8.1 ms: without it the second thread's time grew
//! by up to 40 % (both threads stalled on their first pass at once).

use super::emit::Emitter;

/// Elements per strip of the prefetching loop (four 64-byte lines of fp32).
pub(super) const PF_STRIP: usize = 64;

/// Prefetch at least this many bytes ahead (whole rows): short rows are prefetched several
/// rows ahead, so that the distance still covers a memory latency.
const PF_MIN_BYTES: usize = 2048;

/// Below this many bytes of the inputs read (known at emission), the rows stay in L2
/// between runs: no prefetch.
const PF_MIN_TOTAL: i64 = 1 << 20;

impl Emitter<'_> {
    /// The inputs whose rows are prefetched (set before the row loop): in a row kernel with one
    /// inner iter (the outer iters its leading ones, no gathers), each input laid out like the
    /// iteration space (the same sizes, so row `dlc_o` of it starts at `dlc_o · inner`).
    pub(super) fn plan_prefetch(&mut self) {
        let n = self.r.iters.len();
        let n_outer = self.outer.len();
        if n_outer == 0 || n_outer + 1 != n || self.has_gather {
            return;
        }
        if self.outer != (0..n_outer).collect::<Vec<_>>() {
            return;
        }
        let sizes: Vec<String> = self
            .checked
            .iter_sizes
            .iter()
            .map(|d| self.dim(d))
            .collect();
        let none = std::collections::BTreeMap::new();
        let elems: Option<i64> = self.checked.iter_sizes.iter().try_fold(1i64, |acc, d| {
            d.eval_with(&none).ok().map(|v| acc.saturating_mul(v))
        });
        let mut pf = Vec::new();
        for (k, inp) in self.r.inputs.iter().enumerate() {
            let dims: Vec<String> = inp.memref.shape.iter().map(|s| self.dim(&s.0)).collect();
            let bytes = inp.dtype.size_bytes() as i64;
            if dims == sizes && elems.is_none_or(|e| e.saturating_mul(bytes) >= PF_MIN_TOTAL) {
                pf.push(k);
            }
        }
        self.prefetch = pf;
    }

    /// At the top of a row's body (after the row's iters are decoded): per prefetched input
    /// `k`, `dlc_pf<k>`, the byte address of this row's element 0 in the row
    /// `dlc_pfr` rows ahead (NULL past the last row).
    pub(super) fn prefetch_targets(&mut self) {
        if self.prefetch.is_empty() {
            return;
        }
        let inner = Self::size_var(self.r.iters.len() - 1);
        let row_bytes: Vec<String> = self
            .prefetch
            .iter()
            .map(|k| format!("{} * {inner}", self.r.inputs[*k].dtype.size_bytes()))
            .collect();
        // the first input's row decides the distance (every input has as many rows)
        let rb = row_bytes[0].clone();
        self.line(&format!(
            "const int64_t dlc_pfr = {rb} >= {PF_MIN_BYTES} ? 1 : ({PF_MIN_BYTES} + {rb} - 1) / ({rb} > 0 ? {rb} : 1);"
        ));
        for (k, rb) in self.prefetch.clone().iter().zip(&row_bytes) {
            self.line(&format!(
                "const char *dlc_pf{k} = dlc_o + dlc_pfr < dlc_total ? (const char *)in{k} + (dlc_o + dlc_pfr) * {rb} : NULL;"
            ));
        }
    }

    /// Opens the strip-mined form of the innermost loop over iter `i` (`i<i>` over the strip,
    /// an `omp simd` loop left open), each strip prefetching its stretch of every
    /// `dlc_pf<k>`; closed by two [`Emitter::close_loops`].
    pub(super) fn open_prefetch_strip(&mut self, i: usize) {
        let v = Self::iter_var(i);
        let z = Self::size_var(i);
        self.line(&format!(
            "for (int64_t dlc_pb = 0; dlc_pb < {z}; dlc_pb += {PF_STRIP}) {{"
        ));
        self.indent += 1;
        self.prefetch_stretch("dlc_pb", PF_STRIP);
        self.line(&format!(
            "const int64_t dlc_pe = {z} - dlc_pb < {PF_STRIP} ? {z} : dlc_pb + {PF_STRIP};"
        ));
        self.line("#pragma omp simd");
        self.line(&format!(
            "for (int64_t {v} = dlc_pb; {v} < dlc_pe; {v}++) {{"
        ));
        self.indent += 1;
    }

    /// Per prefetched input `k`: prefetches the `elems` elements from element `at` (a C
    /// variable) of the row `dlc_pfr` rows ahead, one prefetch per 64-byte line.
    pub(super) fn prefetch_stretch(&mut self, at: &str, elems: usize) {
        for k in self.prefetch.clone() {
            let esz = self.r.inputs[k].dtype.size_bytes() as usize;
            let lines: Vec<String> = (0..(elems * esz).div_ceil(64))
                .map(|l| {
                    format!(
                        "__builtin_prefetch(dlc_pf{k} + {at} * {esz} + {}, 0, 3);",
                        l * 64
                    )
                })
                .collect();
            self.line(&format!("if (dlc_pf{k}) {{ {} }}", lines.join(" ")));
        }
    }
}
