//! The tape of choices: generation reads random `u32`s (a value past its end reads 0), so
//! proptest shrinks a failure towards short tapes and the first choice of every decision.

pub(super) struct Tape<'a> {
    pub(super) t: &'a [u32],
    pub(super) i: usize,
}

impl Tape<'_> {
    pub(super) fn next(&mut self) -> u32 {
        let v = self.t.get(self.i).copied().unwrap_or(0);
        self.i += 1;
        v
    }

    /// Uniform in `0..n` (0 when `n <= 1`).
    pub(super) fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            0
        } else {
            self.next() as usize % n
        }
    }

    /// True with probability `num/den`; a 0 on the tape reads false (the simpler choice).
    pub(super) fn chance(&mut self, num: u32, den: u32) -> bool {
        self.next() % den >= den - num
    }

    /// Uniform in `lo..=hi`.
    pub(super) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    pub(super) fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())].clone()
    }
}
