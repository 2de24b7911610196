//! The shared-memory operand tiles of the tensor-core template: their layout, the XOR swizzle
//! of their 16-byte chunks, and the tile coordinates each writer (`cp.async` chunk, register
//! pair) and reader (`ldmatrix` lane) addresses.
//!
//! Every index function here is written once over [`Ix`]: evaluated on `u64` it gives the
//! numbers the bank-conflict tests below check, on [`C`] it prints the C expression the kernel
//! uses, so what is tested is what is emitted.
//!
//! **Bank groups.** Shared memory has 32 four-byte banks; a 16-byte access touches one of the
//! eight 16-byte *bank groups* of a 128-byte line (`byte offset / 16 % 8`). An `ldmatrix` phase
//! (8 lanes × one 16-byte row each), a quarter-warp of 16-byte `cp.async` copies, and a warp of
//! 4-byte stores are conflict-free when their accesses fall in distinct groups (banks).
//!
//! **Swizzle.** A tile row holds `C = len / 8` chunks of 8 two-byte elements, rows stored back
//! to back without padding. Let `G = min(8, largest power of two dividing C)`; chunk `c` of row
//! `r` is stored at chunk `c ^ ((r / (8 / G)) % G)` of the same row. For 128-byte rows (or any
//! multiple) that is `c ^ (r % 8)`, for 64-byte rows `c ^ ((r / 2) % 4)`, for 32-byte rows
//! `c ^ ((r / 4) % 2)`. Invariants:
//! - it permutes the chunks of each aligned `G`-chunk group of a row (`G` divides `C`), so it is
//!   a bijection on the row and keeps every chunk 16-byte aligned and every element pair of a
//!   chunk together;
//! - eight consecutive rows at the same logical chunk (an `ldmatrix` phase, `.trans` or not) hit
//!   eight different bank groups: row `r` starts at group `r·C mod 8`, which separates the rows
//!   `8 / G` apart, and the XOR term separates the `8 / G` rows in between;
//! - an aligned run of 8 linear chunks (a quarter-warp of consecutive `cp.async` copies) or of
//!   128 bytes (a warp of consecutive 4-byte stores) is a union of aligned `G`-chunk groups, so
//!   it is mapped onto itself: still eight (thirty-two) distinct groups (banks).
//!
//! Unswizzled and unpadded, the eight rows of a phase would share one group when rows are
//! 128-byte multiples (an 8-way conflict), two groups for 64-byte rows.

use super::super::contraction::Side;
use std::fmt;

/// Elements of a 16-byte chunk (fp16/bf16).
pub const CHUNK: u64 = 8;

/// Integer index arithmetic, either evaluated (`u64`) or printed as C ([`C`]).
pub trait Ix: Clone {
    fn lit(v: u64) -> Self;
    fn plus(self, o: Self) -> Self;
    fn times(self, k: u64) -> Self;
    fn quot(self, k: u64) -> Self;
    fn modulo(self, k: u64) -> Self;
    fn shr(self, k: u32) -> Self;
    fn shl(self, k: u32) -> Self;
    fn and(self, mask: u64) -> Self;
    fn xor(self, o: Self) -> Self;
}

impl Ix for u64 {
    fn lit(v: u64) -> Self {
        v
    }
    fn plus(self, o: Self) -> Self {
        self + o
    }
    fn times(self, k: u64) -> Self {
        self * k
    }
    fn quot(self, k: u64) -> Self {
        self / k
    }
    fn modulo(self, k: u64) -> Self {
        self % k
    }
    fn shr(self, k: u32) -> Self {
        self >> k
    }
    fn shl(self, k: u32) -> Self {
        self << k
    }
    fn and(self, mask: u64) -> Self {
        self & mask
    }
    fn xor(self, o: Self) -> Self {
        self ^ o
    }
}

/// A C `int` expression; `atomic` when it needs no parentheses as an operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct C {
    text: String,
    atomic: bool,
}

impl C {
    /// A name or any already parenthesized expression.
    pub fn atom(text: impl Into<String>) -> C {
        C {
            text: text.into(),
            atomic: true,
        }
    }

    /// A compound expression (parenthesized where it is an operand).
    pub fn expr(text: impl Into<String>) -> C {
        C {
            text: text.into(),
            atomic: false,
        }
    }

    fn operand(&self) -> String {
        if self.atomic {
            self.text.clone()
        } else {
            format!("({})", self.text)
        }
    }

    fn bin(self, op: &str, rhs: &C) -> C {
        C::expr(format!("{} {op} {}", self.operand(), rhs.operand()))
    }

    fn is_lit(&self, v: u64) -> bool {
        self.text == v.to_string()
    }
}

impl fmt::Display for C {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Ix for C {
    fn lit(v: u64) -> Self {
        C::atom(v.to_string())
    }
    fn plus(self, o: Self) -> Self {
        if o.is_lit(0) {
            self
        } else if self.is_lit(0) {
            o
        } else {
            // `+` is left-associative: a sum needs no parentheses on its left.
            C::expr(format!("{} + {}", self.text, o.operand()))
        }
    }
    fn times(self, k: u64) -> Self {
        if k == 1 {
            self
        } else {
            self.bin("*", &C::lit(k))
        }
    }
    fn quot(self, k: u64) -> Self {
        if k == 1 {
            self
        } else {
            self.bin("/", &C::lit(k))
        }
    }
    fn modulo(self, k: u64) -> Self {
        self.bin("%", &C::lit(k))
    }
    fn shr(self, k: u32) -> Self {
        if k == 0 {
            self
        } else {
            self.bin(">>", &C::lit(k.into()))
        }
    }
    fn shl(self, k: u32) -> Self {
        if k == 0 {
            self
        } else {
            self.bin("<<", &C::lit(k.into()))
        }
    }
    fn and(self, mask: u64) -> Self {
        self.bin("&", &C::lit(mask))
    }
    fn xor(self, o: Self) -> Self {
        self.bin("^", &o)
    }
}

/// The XOR swizzle of a tile whose rows hold `chunks` 16-byte chunks (module doc): chunk `c`
/// of row `r` is stored at `c ^ ((r >> shift) & mask)`, `mask + 1 = G`, `shift = log2(8 / G)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Swizzle {
    pub shift: u32,
    pub mask: u64,
}

impl Swizzle {
    /// The swizzle of rows of `chunks` chunks (none for 0 or an odd count, whose rows already
    /// start in distinct groups).
    pub fn for_row(chunks: u64) -> Swizzle {
        let g = if chunks == 0 {
            1
        } else {
            (1u64 << chunks.trailing_zeros()).min(8)
        };
        Swizzle {
            shift: 3 - g.trailing_zeros(),
            mask: g - 1,
        }
    }

    /// The stored element column of element column `col` of row `row`: only the chunk bits of
    /// `col` change, so the element's offset within its chunk is kept.
    pub fn col<I: Ix>(&self, row: I, col: I) -> I {
        if self.mask == 0 {
            return col;
        }
        let key = row.shr(self.shift).and(self.mask);
        col.xor(key.shl(CHUNK.trailing_zeros()))
    }
}

/// One stage of an operand tile: `rows × len` elements, row-major, unpadded, swizzled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// The rows run along `K` (`[outer][BK]`), else along the outer axis (`[BK][outer]`).
    pub k_fastest: bool,
    pub rows: u64,
    pub len: u64,
    pub swizzle: Swizzle,
}

impl Tile {
    /// The tile of `outer × bk` operand elements (`outer`, `bk` multiples of 8).
    pub fn new(k_fastest: bool, outer: u64, bk: u64) -> Tile {
        let (rows, len) = if k_fastest { (outer, bk) } else { (bk, outer) };
        Tile {
            k_fastest,
            rows,
            len,
            swizzle: Swizzle::for_row(len / CHUNK),
        }
    }

    /// The array indices `[row][stored column]` of operand element (`o`, `k`) of the tile.
    pub fn place<I: Ix>(&self, o: I, k: I) -> (I, I) {
        let (row, col) = if self.k_fastest { (o, k) } else { (k, o) };
        (row.clone(), self.swizzle.col(row, col))
    }

    /// The tile coordinates (`o`, `k`) of the start of `w`-element run number `c`: runs walk
    /// the rows in storage order (a run never crosses a row: `w` divides `len`).
    pub fn run<I: Ix>(&self, c: I, w: u64) -> (I, I) {
        let per = self.len / w;
        let row = c.clone().quot(per);
        let col = c.modulo(per).times(w);
        if self.k_fastest {
            (row, col)
        } else {
            (col, row)
        }
    }
}

/// The tile coordinates (`o`, `k`) whose 16-byte row `lane` gives to an `ldmatrix.x4` of the
/// 16×16 block at (`ob`, `kb`): lane `l` supplies row `l % 8` of matrix `q = l / 8`; for `A`
/// matrix `q` covers outer half `q % 2` and `K` half `q / 2`, for `B` `K` half `q % 2` and outer
/// half `q / 2`. The row runs along the tile's rows (`K` when `k_fastest`, else the outer axis:
/// the `.trans` load).
pub fn ldmatrix_lane<I: Ix>(side: Side, k_fastest: bool, ob: I, kb: I, lane: I) -> (I, I) {
    let half_of_q = lane.clone().shr(3).and(1);
    let q_half = lane.clone().shr(4);
    let (oh, kh) = match side {
        Side::A => (half_of_q, q_half),
        Side::B => (q_half, half_of_q),
    };
    let row = lane.and(7);
    let o = ob.plus(oh.times(8));
    let k = kb.plus(kh.times(8));
    if k_fastest {
        (o.plus(row), k)
    } else {
        (o, k.plus(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::space::{warp_tiles, Algo, MMA_SYNC_TILES};
    use std::collections::BTreeSet;

    /// Bytes of a tile element (fp16/bf16).
    const ELEM_BYTES: u64 = 2;

    /// The byte offset of element (`o`, `k`) of stage `st` of `t` from the buffer's start.
    fn byte_offset(t: &Tile, st: u64, o: u64, k: u64) -> u64 {
        let (row, col) = t.place(o, k);
        ((st * t.rows + row) * t.len + col) * ELEM_BYTES
    }

    /// A block tile and warp grid of the `mma_sync` plan space.
    struct Shape {
        tile: [u64; 3],
        warps: [u64; 2],
    }

    /// Every `mma_sync` tile the plan space can choose, with each of its warp grids: the
    /// standard tiles, and the row-resident `64 × BN × 32` tiles (`BN` a multiple of 16 above
    /// the widest standard tile).
    fn shapes() -> Vec<Shape> {
        let widest = MMA_SYNC_TILES.iter().map(|t| t[1]).max().unwrap_or(0);
        let row_resident = (widest / 16 + 1..=64).map(|j| [64, 16 * j, 32]);
        MMA_SYNC_TILES
            .into_iter()
            .chain(row_resident)
            .flat_map(|[bm, bn, bk]| {
                warp_tiles(Algo::MmaSync, bm, bn)
                    .into_iter()
                    .filter(move |(wm, wn)| wm % 16 == 0 && wn % 16 == 0)
                    .map(move |(wm, wn)| Shape {
                        tile: [bm, bn, bk],
                        warps: [bm / wm, bn / wn],
                    })
            })
            .collect()
    }

    /// The bank group (`unit` 16: of a 16-byte access; 4: the bank) of a byte offset.
    fn group(offset: u64, unit: u64) -> u64 {
        offset / unit % (128 / unit)
    }

    fn distinct(offsets: &[u64], unit: u64) -> bool {
        let groups: BTreeSet<u64> = offsets.iter().map(|o| group(*o, unit)).collect();
        groups.len() == offsets.len()
    }

    /// The byte offsets of every `ldmatrix` phase (8 lanes) of every warp of `s` on `tile`.
    fn ldmatrix_phases(s: &Shape, side: Side, tile: &Tile) -> Vec<Vec<u64>> {
        let [bm, bn, bk] = s.tile;
        let (wm, wn) = (bm / s.warps[0], bn / s.warps[1]);
        let mut out = Vec::new();
        for warp in 0..s.warps[0] * s.warps[1] {
            let (wr, wc) = (warp / s.warps[1] * wm, warp % s.warps[1] * wn);
            let (origin, blocks) = match side {
                Side::A => (wr, wm / 16),
                Side::B => (wc, wn / 16),
            };
            for (b, ks, q) in grid3(blocks, bk / 16, 4) {
                let phase = (8 * q..8 * q + 8)
                    .map(|lane| {
                        let (o, k) =
                            ldmatrix_lane(side, tile.k_fastest, origin + b * 16, ks * 16, lane);
                        byte_offset(tile, 1, o, k)
                    })
                    .collect();
                out.push(phase);
            }
        }
        out
    }

    /// `(a, b, c)` over `0..x × 0..y × 0..z`.
    fn grid3(x: u64, y: u64, z: u64) -> impl Iterator<Item = (u64, u64, u64)> {
        (0..x).flat_map(move |a| (0..y).flat_map(move |b| (0..z).map(move |c| (a, b, c))))
    }

    /// The byte offsets of each warp's `w`-element stores of `tile`, grouped by `per` lanes
    /// (8 for 16-byte copies: a quarter-warp phase; 32 for 4-byte stores: the warp).
    fn store_phases(s: &Shape, tile: &Tile, w: u64, per: u64) -> Vec<Vec<u64>> {
        let threads = s.warps[0] * s.warps[1] * 32;
        let total = tile.rows * tile.len / w;
        let mut out = Vec::new();
        for l in 0..total.div_ceil(threads) {
            for first in (0..threads).step_by(per as usize) {
                let phase: Vec<u64> = (first..first + per)
                    .map(|tid| tid + l * threads)
                    .filter(|c| *c < total)
                    .map(|c| {
                        let (o, k) = tile.run(c, w);
                        byte_offset(tile, 1, o, k)
                    })
                    .collect();
                out.push(phase);
            }
        }
        out
    }

    fn tiles(s: &Shape) -> Vec<(Side, Tile)> {
        let [bm, bn, bk] = s.tile;
        let mut out = Vec::new();
        for k_fastest in [true, false] {
            out.push((Side::A, Tile::new(k_fastest, bm, bk)));
            out.push((Side::B, Tile::new(k_fastest, bn, bk)));
        }
        out
    }

    #[test]
    fn swizzle_of_row_lengths() {
        let key = |chunks| {
            let s = Swizzle::for_row(chunks);
            (s.shift, s.mask)
        };
        assert_eq!(key(8), (0, 7), "128-byte rows: c ^ (r % 8)");
        assert_eq!(key(16), (0, 7));
        assert_eq!(key(4), (1, 3), "64-byte rows: c ^ ((r / 2) % 4)");
        assert_eq!(key(12), (1, 3));
        assert_eq!(key(2), (2, 1), "32-byte rows: c ^ ((r / 4) % 2)");
        assert_eq!(key(1), (3, 0));
        assert_eq!(key(0), (3, 0));
    }

    #[test]
    fn swizzle_permutes_each_row_and_keeps_pairs() {
        for chunks in 1..=40u64 {
            let t = Tile::new(true, 16, chunks * CHUNK);
            for row in 0..16 {
                let cols: BTreeSet<u64> = (0..t.len).map(|c| t.place(row, c).1).collect();
                assert_eq!(cols, (0..t.len).collect(), "{chunks} chunks, row {row}");
                for c in (0..t.len).step_by(2) {
                    assert_eq!(t.place(row, c).1 + 1, t.place(row, c + 1).1);
                }
            }
        }
    }

    #[test]
    fn c_expressions() {
        let t = Tile::new(true, 64, 32);
        let (row, col) = t.place(C::atom("o"), C::atom("kk"));
        assert_eq!(format!("{row}][{col}"), "o][kk ^ (((o >> 1) & 3) << 3)");
        let t = Tile::new(false, 64, 32);
        let (row, col) = t.place(C::atom("o"), C::atom("kk"));
        assert_eq!(format!("{row}][{col}"), "kk][o ^ ((kk & 7) << 3)");
        let (o, k) = t.run(C::atom("c"), CHUNK);
        assert_eq!(
            (o.to_string(), k.to_string()),
            ("(c % 8) * 8".into(), "c / 8".into())
        );
        let (o, k) = ldmatrix_lane(
            Side::A,
            true,
            C::expr("wr + mi * 16"),
            C::expr("ks * 16"),
            C::atom("lane"),
        );
        assert_eq!(
            o.to_string(),
            "wr + mi * 16 + (((lane >> 3) & 1) * 8) + (lane & 7)"
        );
        assert_eq!(k.to_string(), "ks * 16 + ((lane >> 4) * 8)");
    }

    #[test]
    fn ldmatrix_phases_are_conflict_free() {
        for s in shapes() {
            for (side, tile) in tiles(&s) {
                for phase in ldmatrix_phases(&s, side, &tile) {
                    assert!(
                        distinct(&phase, 16),
                        "{:?} {side:?} {tile:?}: ldmatrix phase {phase:?}",
                        s.tile
                    );
                }
            }
        }
    }

    #[test]
    fn stores_are_conflict_free() {
        for s in shapes() {
            for (_, tile) in tiles(&s) {
                for phase in store_phases(&s, &tile, CHUNK, 8) {
                    assert!(
                        distinct(&phase, 16),
                        "{:?} {tile:?}: cp.async {phase:?}",
                        s.tile
                    );
                }
                for phase in store_phases(&s, &tile, 2, 32) {
                    assert!(
                        distinct(&phase, 4),
                        "{:?} {tile:?}: stores {phase:?}",
                        s.tile
                    );
                }
            }
        }
    }

    #[test]
    fn unswizzled_tiles_conflict() {
        // Without the swizzle (and without padding) the rows of 128-byte multiples put all
        // eight rows of an ldmatrix phase in one bank group, 64-byte rows in two.
        for s in shapes() {
            for (side, tile) in tiles(&s) {
                let plain = Tile {
                    swizzle: Swizzle { shift: 0, mask: 0 },
                    ..tile
                };
                let worst = ldmatrix_phases(&s, side, &plain)
                    .iter()
                    .map(|p| {
                        p.iter()
                            .map(|o| group(*o, 16))
                            .collect::<BTreeSet<_>>()
                            .len()
                    })
                    .min()
                    .unwrap_or(8);
                let want = match plain.len * ELEM_BYTES % 128 {
                    0 => 1,
                    64 => 2,
                    _ => continue,
                };
                assert_eq!(worst, want, "{:?} {side:?} {tile:?}", s.tile);
            }
        }
    }
}
