//! The cover the extractor chooses for attention: the fused kernel wherever its own pricing
//! prefers it, whatever the first kernel of the pair costs on its own.

use super::*;

/// The graph of [`graph`] at `B = 8, H = 16, S = 2048`.
fn large(d: u64, causal: bool) -> String {
    let text = graph(d, d, "fp16", causal, None);
    let out = text.replace(
        "\"symbols\": {\"B\": 1, \"H\": 2, \"S\": 64}",
        "\"symbols\": {\"B\": 8, \"H\": 16, \"S\": 2048}",
    );
    assert_ne!(out, text, "the graph's symbols moved");
    out
}

/// d = 256 at S = 2048 on sm80, causal or not, is the one fused kernel. The scores-and-softmax
/// kernel alone (a 3-pass row kernel, 3.9 ms causal) costs more there than `QKᵀ` and a row
/// softmax as two kernels (3.3 ms), and the `P·V` kernel was priced as the fused kernel less
/// that first kernel's time, about 0: the extractor kept the split scores and ran `P·V` as an
/// unpaired SIMT kernel of 19 ms (22.4 ms in all against 2.0 ms fused). The pair is now priced
/// with the first kernel's share (`extract::own_cost::first_share`).
#[test]
fn d256_attention_at_s2048_on_sm80_is_one_fused_kernel() {
    use dlc_egg::target::Arch;
    for causal in [true, false] {
        let p = lowered(&large(256, causal));
        let o = optimized_for(&p, Arch::Sm80);
        let e = emitted(&o, &o.program);
        assert_eq!(
            launches(&e.manifest),
            vec!["attention"],
            "causal {causal}: {:?}",
            o.kernels
                .iter()
                .map(|k| (&k.name, k.cost.time.micros()))
                .collect::<Vec<_>>()
        );
    }
}
