//! Native emulation of the tensor-core intrinsics of `#[kernel]` SIMT code: asynchronous
//! global-to-shared copies (`cp.async` with commit groups and waits), warp-wide matrix loads
//! from shared memory (`ldmatrix`), the warp-wide matrix multiply-accumulate
//! `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32`, and Hopper's
//! warpgroup-wide `wgmma.mma_async.sync.aligned.m64n{64,128,256}k16` on shared tiles.
//!
//! Every layout here is PTX's, so a kernel computes natively what it computes on the GPU
//! (PTX ISA, "Warp Level Matrix Multiply-Accumulate Instructions"). Fragments are `u32`
//! registers holding two 16-bit elements, the element of the lower index in the low half.
//! With `g = lane / 4` (PTX's `groupID`) and `t = lane % 4` (`threadID_in_group`):
//! - A, 16 x 16, row-major ("Matrix Fragments for mma.m16n8k16 with floating point type"):
//!   register `r` of a lane holds row `g + 8 * (r % 2)`, columns `2t + 8 * (r / 2)` and the
//!   next;
//! - B, 16 x 8 (K x N), "col": register `r` holds column `g`, rows `2t + 8 * r` and the next;
//! - C and D, 16 x 8 in f32: element `i` of a lane is row `g + 8 * (i / 2)`, column
//!   `2t + i % 2`.
//!
//! `ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16` ("Warp-level matrix load
//! instruction: ldmatrix"): lane `8m + r` gives the address of row `r` of matrix `m` (8
//! elements, 16 bytes, 16-byte aligned); lane `l` receives, for matrix `m`, the word holding
//! row `l / 4`, columns `2 (l % 4)` and the next, or with `.trans` the elements of column
//! `l / 4` in rows `2 (l % 4)` and the next.
//!
//! `cp.async` copies are deferred as on the GPU: a copy lands in shared memory only when the
//! thread waits for its commit group (`cp.async.wait_group`), or when the thread ends, so a
//! kernel that reads a tile before waiting for it reads stale data natively too.
//!
//! Invariant: the warp-wide intrinsics exchange through the warp's slots and barrier, like the
//! shuffles, and need all 32 lanes of a full warp; anything PTX leaves undefined (misaligned
//! rows, partial warps) is a panic natively.

use super::LaunchError;
use super::block::{GlobalMut, SharedArray, ThreadCtx, WARP_SIZE, WIDE};
use crate::{DType, Element, Float, FloatMath};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// One thread's `cp_async` copies: those issued since the last commit, and the committed
/// groups not yet waited for, oldest first.
#[derive(Default)]
pub struct AsyncCopies {
    open: Vec<Copy16>,
    groups: VecDeque<Vec<Copy16>>,
}

/// A 16-byte copy: the words read from global memory when it was issued, and where they go.
struct Copy16 {
    cells: Arc<[AtomicU64]>,
    at: usize,
    words: [u32; 4],
}

impl Copy16 {
    fn land(self) {
        for (i, w) in self.words.into_iter().enumerate() {
            self.cells[self.at + i].store(u64::from(w), Relaxed);
        }
    }
}

/// Errors unless `T` is a 16-bit float: kernels that use the tensor cores exist for f16 and
/// bf16 only.
pub fn half_only<T: Element>(kernel: &str) -> Result<(), LaunchError> {
    match T::DTYPE {
        DType::F16 | DType::BF16 => Ok(()),
        d => Err(LaunchError::new(format!(
            "kernel `{kernel}` uses the tensor cores, which take f16 and bf16 elements, not {d:?}"
        ))),
    }
}

/// The 16-bit pattern of `x`, an f16 or bf16 value.
pub(crate) fn bits16<T: Float>(x: T) -> u16 {
    let v = x.to_acc().to_f64();
    match T::DTYPE {
        DType::BF16 => half::bf16::from_f64(v).to_bits(),
        DType::F16 => half::f16::from_f64(v).to_bits(),
        d => panic!("tensor-core intrinsics take f16 or bf16 elements, not {d:?}"),
    }
}

/// The value of a 16-bit pattern of `T` (f16 or bf16), exactly.
fn value16<T: Float>(bits: u16) -> f64 {
    match T::DTYPE {
        DType::BF16 => f64::from(half::bf16::from_bits(bits).to_f32()),
        DType::F16 => f64::from(half::f16::from_bits(bits).to_f32()),
        d => panic!("tensor-core intrinsics take f16 or bf16 elements, not {d:?}"),
    }
}

/// `pack2(lo, hi)`: two compute-type values rounded to `T` and packed into one `u32`, `lo` in
/// the low half, as a fragment register or a shared tile word holds them.
pub fn pack2<T: Float>(lo: T::Acc, hi: T::Acc) -> u32 {
    u32::from(bits16(T::from_acc(lo))) | (u32::from(bits16(T::from_acc(hi))) << 16)
}

/// `store2(o, i, lo, hi)`: `o[i]` and `o[i + 1]` set to `lo` and `hi` rounded to `T`. On a
/// GPU it is one 32-bit store, which must be 4-byte aligned, so an odd `i` is refused here as
/// the GPU would fault on it.
#[track_caller]
pub fn store2<T: Float>(o: &GlobalMut<'_, T>, i: usize, lo: T::Acc, hi: T::Acc) {
    assert!(
        i.is_multiple_of(2),
        "`store2` at index {i}: its 32-bit store needs an even index"
    );
    o.store(i, T::from_acc(lo));
    o.store(i + 1, T::from_acc(hi));
}

impl ThreadCtx<'_> {
    /// Every lane's `W` words, after each lane of this thread's warp gave its own.
    fn warp_all<const W: usize>(&self, what: &str, mine: [u64; W]) -> [[u64; W]; WARP_SIZE] {
        const { assert!(W <= WIDE) };
        let Some(warp) = self.warp().filter(|w| w.len == WARP_SIZE) else {
            panic!("`{what}` is warp-wide: every lane of a full warp of 32 threads takes part");
        };
        let lane = self.linear % WARP_SIZE;
        for (i, w) in mine.iter().enumerate() {
            warp.wide[lane * WIDE + i].store(*w, Relaxed);
        }
        self.wait_at(&warp.barrier);
        let all =
            std::array::from_fn(|l| std::array::from_fn(|i| warp.wide[l * WIDE + i].load(Relaxed)));
        // Nobody may overwrite a slot before every lane has read it.
        self.wait_at(&warp.barrier);
        all
    }

    /// `cp.async.cg.shared.global [dst], [src], 16, src-size`: starts copying elements
    /// `src[index..index + n]` (at most 8; `n` past 8 copies 8) into the 16 bytes at words
    /// `word..word + 4` of `dst`, zero-filling what `n` leaves. Nothing is read when `n` is 0.
    #[track_caller]
    pub fn cp_async<T: Float, const N: usize>(
        &self,
        dst: &SharedArray<u32, N>,
        word: usize,
        src: &[T],
        index: usize,
        n: usize,
    ) {
        let n = n.min(8);
        assert!(
            word.is_multiple_of(4) && word + 4 <= N,
            "cp_async: shared word {word} is not the start of 16 aligned bytes inside the {N}-word array"
        );
        assert!(
            n == 0 || index.is_multiple_of(8),
            "cp_async: element {index} is not on a 16-byte boundary (a multiple of 8 elements)"
        );
        let mut words = [0u32; 4];
        let read = if n == 0 { &[] } else { &src[index..index + n] };
        for (e, x) in read.iter().enumerate() {
            words[e / 2] |= u32::from(bits16(*x)) << (16 * (e % 2));
        }
        self.copies.borrow_mut().open.push(Copy16 {
            cells: Arc::clone(&dst.cells),
            at: word,
            words,
        });
    }

    /// `cp.async.commit_group`: closes the group of this thread's copies issued since the last
    /// commit (possibly empty).
    pub fn cp_async_commit(&self) {
        let mut c = self.copies.borrow_mut();
        let group = std::mem::take(&mut c.open);
        c.groups.push_back(group);
    }

    /// `cp.async.wait_group n`: completes every committed group but the newest `n`.
    pub fn cp_async_wait(&self, n: usize) {
        let mut c = self.copies.borrow_mut();
        while c.groups.len() > n {
            for copy in c.groups.pop_front().into_iter().flatten() {
                copy.land();
            }
        }
    }

    /// Lands every copy the thread issued: on the GPU they complete after the thread ends.
    pub(crate) fn finish_copies(&self) {
        let mut c = self.copies.borrow_mut();
        // Most kernels issue none; every emulated thread of every launch passes here, so the
        // drain below (a measurable share of a Llama prefill's rotary kernels) is skipped.
        if c.open.is_empty() && c.groups.is_empty() {
            return;
        }
        let open = std::mem::take(&mut c.open);
        for copy in c.groups.drain(..).flatten().chain(open) {
            copy.land();
        }
    }

    /// `ldmatrix.sync.aligned.m8n8.x{count}{.trans}.shared.b16`: `count` 8 x 8 matrices of
    /// 16-bit elements from `tile` into `frag[at..at + count]`; this lane gives the word index
    /// `word` of one row (lanes `8m..8m + 8` the rows of matrix `m`).
    #[track_caller]
    pub fn ldmatrix<const N: usize>(
        &self,
        count: usize,
        trans: bool,
        frag: &mut [u32],
        at: usize,
        tile: &SharedArray<u32, N>,
        word: usize,
    ) {
        let addrs = self.warp_all("ldmatrix", [word as u64]);
        let lane = self.linear % WARP_SIZE;
        // The first word of row `r` of matrix `m`.
        let row = |m: usize, r: usize| {
            let a = addrs[8 * m + r][0] as usize;
            assert!(
                a.is_multiple_of(4) && a + 4 <= N,
                "ldmatrix: lane {} gave word {a}, not the start of a 16-byte row inside the \
                 {N}-word array",
                8 * m + r
            );
            a
        };
        for m in 0..count {
            frag[at + m] = if trans {
                // Column `lane / 4`, rows `2 (lane % 4)` and the next.
                let (c, r) = (lane / 4, 2 * (lane % 4));
                let half = |r: usize| (tile.get(row(m, r) + c / 2) >> (16 * (c % 2))) & 0xffff;
                half(r) | (half(r + 1) << 16)
            } else {
                tile.get(row(m, lane / 4) + lane % 4)
            };
        }
    }

    /// `mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32`: `c[ci..ci + 4] += A B` for the warp's
    /// A (16 x 16, registers `a[ai..ai + 4]` of each lane) and B (16 x 8, `b[bi..bi + 2]`),
    /// in the fragment layouts of this module's documentation. Each product of two 16-bit
    /// values is exact; the sum is rounded to f32 once.
    #[track_caller]
    pub fn mma_m16n8k16<T: Float>(
        &self,
        c: &mut [T::Acc],
        ci: usize,
        a: &[u32],
        ai: usize,
        b: &[u32],
        bi: usize,
    ) {
        let pair = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
        let mine = [
            pair(a[ai], a[ai + 1]),
            pair(a[ai + 2], a[ai + 3]),
            pair(b[bi], b[bi + 1]),
        ];
        let all = self.warp_all("mma_m16n8k16", mine);
        // Register `r` of lane `l`: A's are 0..4, B's 4 and 5.
        let reg = |l: usize, r: usize| (all[l][r / 2] >> (32 * (r % 2))) as u32;
        let half = |w: u32, k: usize| value16::<T>((w >> (16 * (k % 2))) as u16);
        let a_at =
            |row: usize, k: usize| half(reg(4 * (row % 8) + (k % 8) / 2, row / 8 + 2 * (k / 8)), k);
        let b_at = |k: usize, n: usize| half(reg(4 * n + (k % 8) / 2, 4 + k / 8), k);
        let lane = self.linear % WARP_SIZE;
        for i in 0..4 {
            let (row, col) = (lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2);
            let mut sum = c[ci + i].to_f64();
            for k in 0..16 {
                sum += a_at(row, k) * b_at(k, col);
            }
            c[ci + i] = <T::Acc as FloatMath>::c(f64::from(sum as f32));
        }
    }
}

/// Threads of a warpgroup, the unit of Hopper's `wgmma`: four consecutive warps.
pub const WARPGROUP: usize = 128;

/// Panics unless word `start` can begin a `wgmma` tile operand: a 32-byte K step (16
/// elements of a 64-wide row) inside the first 128 bytes of a 1024-byte swizzle group.
#[track_caller]
fn check_tile_start(what: &str, start: usize) {
    let base = 4 * start;
    assert!(
        base % 1024 < 128 && base.is_multiple_of(32),
        "wgmma: the {what} tile starts at word {start} (byte {base}), which is not a 32-byte K \
         step inside the first 128 bytes of a 1024-byte swizzle group"
    );
}

/// Where element `k` of row `row` of a K-major tile in the 128-byte swizzle lies: the word and
/// the shift of its half, for a tile operand starting at word `start` (checked by
/// [`check_tile_start`]) of a `words`-word array.
///
/// The unswizzled byte address is `start + 1024 (row / 8) + 128 (row % 8) + 2 k`; the hardware
/// then swaps its 16-byte chunk (address bits 4 to 6) by the row within the 1024-byte group
/// (bits 7 to 9).
#[track_caller]
fn swizzled_128b(what: &str, start: usize, words: usize, row: usize, k: usize) -> (usize, u32) {
    let addr = 4 * start + 1024 * (row / 8) + 128 * (row % 8) + 2 * k;
    let phys = addr ^ (((addr >> 7) & 7) << 4);
    assert!(
        phys / 4 < words,
        "wgmma: row {row} of the {what} tile (from word {start}) lies past the {words}-word array"
    );
    (phys / 4, 16 * ((phys / 2) % 2) as u32)
}

impl ThreadCtx<'_> {
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.T.T` with both operands in shared memory,
    /// K-major in the 128-byte swizzle (see [`swizzled_128b`]): `c[ci..ci + n / 2] += A B^T`
    /// for A (64 x 16) from word `a_word` of `ta` and B (`n` x 16) from word `b_word` of `tb`.
    ///
    /// The warpgroup's accumulator: register `i` of thread `l` of the group holds row
    /// `16 (l / 32) + (l % 32) / 4 + 8 ((i / 2) % 2)` and column `8 (i / 4) + 2 (l % 4) + i % 2`.
    /// Each thread reads shared memory for its own elements, so nothing is exchanged; natively
    /// the product completes here, where on the GPU it completes at `wgmma_wait`. Each product
    /// of two 16-bit values is exact, and each 16-long sum is rounded to f32 once, as by
    /// [`ThreadCtx::mma_m16n8k16`].
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn wgmma<T: Float, const NA: usize, const NB: usize>(
        &self,
        n: usize,
        c: &mut [T::Acc],
        ci: usize,
        ta: &SharedArray<u32, NA>,
        a_word: usize,
        tb: &SharedArray<u32, NB>,
        b_word: usize,
    ) {
        let threads = self.block.launch.block.count();
        assert!(
            threads.is_multiple_of(WARPGROUP),
            "`wgmma` is warpgroup-wide: a block of {threads} threads is not whole warpgroups of \
             {WARPGROUP}"
        );
        check_tile_start("A", a_word);
        check_tile_start("B", b_word);
        let t = self.linear % WARPGROUP;
        let (warp, lane) = (t / WARP_SIZE, t % WARP_SIZE);
        let a_at = |row: usize, k: usize| {
            let (w, shift) = swizzled_128b("A", a_word, NA, row, k);
            value16::<T>((ta.get(w) >> shift) as u16)
        };
        let b_at = |col: usize, k: usize| {
            let (w, shift) = swizzled_128b("B", b_word, NB, col, k);
            value16::<T>((tb.get(w) >> shift) as u16)
        };
        for i in 0..n / 2 {
            let row = 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
            let mut sum = c[ci + i].to_f64();
            for k in 0..16 {
                sum += a_at(row, k) * b_at(col, k);
            }
            c[ci + i] = <T::Acc as FloatMath>::c(f64::from(sum as f32));
        }
    }
}

/// Where element `n` of K row `k` of an N-major tile in the 128-byte swizzle lies: the word
/// and the shift of its half, for a tile operand starting at word `start` (a 1024-byte
/// boundary) of a `words`-word array whose 64-column panels are `panel` words apart.
///
/// Each K row of a panel is 64 elements (128 bytes), 8-row groups 1024 bytes apart; the
/// unswizzled byte address is `start + panel (n / 64) + 1024 (k / 8) + 128 (k % 8) + 2 (n %
/// 64)`, and the hardware swaps its 16-byte chunk by the row within the group, as for
/// [`swizzled_128b`].
#[track_caller]
fn swizzled_128b_n_major(
    start: usize,
    words: usize,
    panel: usize,
    k: usize,
    n: usize,
) -> (usize, u32) {
    let addr = 4 * (start + panel * (n / 64)) + 1024 * (k / 8) + 128 * (k % 8) + 2 * (n % 64);
    let phys = addr ^ (((addr >> 7) & 7) << 4);
    assert!(
        phys / 4 < words,
        "wgmma_rs: row {k} of the B tile (from word {start}, panels {panel} words apart) lies \
         past the {words}-word array"
    );
    (phys / 4, 16 * ((phys / 2) % 2) as u32)
}

impl ThreadCtx<'_> {
    /// `wgmma.mma_async.sync.aligned.m64n{n}k16.f32.T.T` with A from registers and B N-major
    /// in shared memory (`imm-trans-b` 1): `c[ci..ci + n / 2] += A B` for A (64 x 16) and B
    /// (16 x `n`) from word `b_word` of `tb`, its 64-column panels `b_panel` words apart (see
    /// [`swizzled_128b_n_major`]).
    ///
    /// Warp `w` of the warpgroup gives rows `16 w..16 w + 16` of A in `a[ai..ai + 4]` of its
    /// lanes, in the layout of `mma_m16n8k16`'s A fragment (register `r` of lane `l`: row
    /// `l / 4 + 8 (r % 2)`, columns `2 (l % 4) + 8 (r / 2)` and the next), which is the
    /// accumulator's layout of the same 16 columns: scores computed by one `wgmma` become the
    /// A operand of the next by packing pairs. The accumulator is [`ThreadCtx::wgmma`]'s; the
    /// rows of a warp come from its own lanes, exchanged through the warp.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn wgmma_rs<T: Float, const NB: usize>(
        &self,
        n: usize,
        c: &mut [T::Acc],
        ci: usize,
        a: &[u32],
        ai: usize,
        tb: &SharedArray<u32, NB>,
        b_word: usize,
        b_panel: usize,
    ) {
        let threads = self.block.launch.block.count();
        assert!(
            threads.is_multiple_of(WARPGROUP),
            "`wgmma_rs` is warpgroup-wide: a block of {threads} threads is not whole warpgroups \
             of {WARPGROUP}"
        );
        assert!(
            (4 * b_word).is_multiple_of(1024) && (n <= 64 || (4 * b_panel).is_multiple_of(1024)),
            "wgmma_rs: the B tile starts at word {b_word} with panels {b_panel} words apart; \
             both must be on 1024-byte boundaries"
        );
        let pair = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
        let all = self.warp_all(
            "wgmma_rs",
            [pair(a[ai], a[ai + 1]), pair(a[ai + 2], a[ai + 3])],
        );
        let reg = |l: usize, r: usize| (all[l][r / 2] >> (32 * (r % 2))) as u32;
        let a_at = |row: usize, k: usize| {
            let w = reg(4 * (row % 8) + (k % 8) / 2, row / 8 + 2 * (k / 8));
            value16::<T>((w >> (16 * (k % 2))) as u16)
        };
        let b_at = |k: usize, col: usize| {
            let (w, shift) = swizzled_128b_n_major(b_word, NB, b_panel, k, col);
            value16::<T>((tb.get(w) >> shift) as u16)
        };
        let lane = self.linear % WARP_SIZE;
        for i in 0..n / 2 {
            let row = lane / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
            let mut sum = c[ci + i].to_f64();
            for k in 0..16 {
                sum += a_at(row, k) * b_at(k, col);
            }
            c[ci + i] = <T::Acc as FloatMath>::c(f64::from(sum as f32));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::LaunchConfig;
    use crate::kernel::block::{BlockOrder, GlobalMut, run_blocks};
    use half::bf16;

    /// Small integers, exact in bf16 and in every sum below.
    fn a_val(r: usize, k: usize) -> f32 {
        ((r * 3 + k * 5) % 7) as f32 - 3.0
    }
    fn b_val(k: usize, n: usize) -> f32 {
        ((k * 2 + n * 7) % 5) as f32 - 2.0
    }
    fn bits(v: f32) -> u32 {
        u32::from(bf16::from_f32(v).to_bits())
    }

    /// One warp: A (16 x 16) and B (16 x 8) row-major in shared memory, loaded by `ldmatrix`
    /// (B transposed) and also built by hand from PTX's fragment layouts; the two must agree,
    /// and `mma` must give the plain product.
    #[test]
    fn ldmatrix_and_mma_follow_the_ptx_layouts() {
        let mut out = vec![0.0f32; 16 * 8];
        let mut bad = vec![0u32; 32];
        let g = GlobalMut::new("t", "out", &mut out).unwrap();
        let flags = GlobalMut::new_u32("t", "bad", &mut bad).unwrap();
        run_blocks(
            "t",
            LaunchConfig::new(1, 32),
            true,
            BlockOrder::InOrder,
            |blk| {
                // A: 16 rows of 8 words; B: 16 rows (k) of 4 words.
                let sa = SharedArray::<u32, 128>::new();
                let sb = SharedArray::<u32, 64>::new();
                blk.run_threads(|t| {
                    let lane = t.lane_id();
                    if lane == 0 {
                        for r in 0..16 {
                            for w in 0..8 {
                                sa.set(
                                    r * 8 + w,
                                    bits(a_val(r, 2 * w)) | bits(a_val(r, 2 * w + 1)) << 16,
                                );
                            }
                        }
                        for k in 0..16 {
                            for w in 0..4 {
                                sb.set(
                                    k * 4 + w,
                                    bits(b_val(k, 2 * w)) | bits(b_val(k, 2 * w + 1)) << 16,
                                );
                            }
                        }
                    }
                    t.sync_threads();
                    let (gid, tig) = (lane / 4, lane % 4);
                    let m = lane / 8;
                    let mut a = [0u32; 4];
                    t.ldmatrix(
                        4,
                        false,
                        &mut a,
                        0,
                        &sa,
                        (m % 2 * 8 + lane % 8) * 8 + m / 2 * 4,
                    );
                    let mut b = [0u32; 2];
                    t.ldmatrix(2, true, &mut b, 0, &sb, (m % 2 * 8 + lane % 8) * 4);
                    let by_hand_a: [u32; 4] = std::array::from_fn(|r| {
                        let (row, k) = (gid + 8 * (r % 2), 2 * tig + 8 * (r / 2));
                        bits(a_val(row, k)) | bits(a_val(row, k + 1)) << 16
                    });
                    let by_hand_b: [u32; 2] = std::array::from_fn(|r| {
                        let k = 2 * tig + 8 * r;
                        bits(b_val(k, gid)) | bits(b_val(k + 1, gid)) << 16
                    });
                    if a != by_hand_a || b != by_hand_b {
                        flags.store(lane, 1);
                    }
                    let mut c = [1.0f32; 4];
                    t.mma_m16n8k16::<bf16>(&mut c, 0, &a, 0, &b, 0);
                    for (i, v) in c.iter().enumerate() {
                        g.store((gid + 8 * (i / 2)) * 8 + 2 * tig + i % 2, *v);
                    }
                })
            },
        )
        .unwrap();
        assert_eq!(bad, vec![0; 32], "fragments differ from PTX's layouts");
        for r in 0..16 {
            for n in 0..8 {
                let want: f32 = 1.0 + (0..16).map(|k| a_val(r, k) * b_val(k, n)).sum::<f32>();
                assert_eq!(out[r * 8 + n], want, "D[{r}][{n}]");
            }
        }
    }

    /// The 128-byte swizzle: chunk `c` of row `r` at chunk `c ^ (r % 8)`, 8-row groups 1024
    /// bytes apart, a K step of 16 elements 32 bytes further; starts off a step panic.
    #[test]
    fn the_128_byte_swizzle_moves_chunks_by_the_row() {
        // Row 0: no swap. Row 9 (group 1, row 1 in it), element 8 (chunk 1): chunk 0.
        assert_eq!(swizzled_128b("A", 0, 4096, 0, 9), (4, 16));
        assert_eq!(swizzled_128b("A", 0, 4096, 9, 8), (288, 0));
        // From the second K step (word 8): element 0 is chunk 2, row 3 puts it at chunk 1.
        assert_eq!(swizzled_128b("B", 8, 4096, 3, 0), (3 * 32 + 4, 0));
        let off = std::panic::catch_unwind(|| check_tile_start("A", 4));
        assert!(off.is_err(), "a start off a 32-byte step is refused");
    }

    /// A copy lands only when its group is waited for (or the thread ends).
    #[test]
    fn cp_async_lands_at_the_wait() {
        let src: Vec<bf16> = (0..16).map(|i| bf16::from_f32(i as f32)).collect();
        let mut seen = vec![0u32; 3];
        let g = GlobalMut::new_u32("t", "seen", &mut seen).unwrap();
        run_blocks(
            "t",
            LaunchConfig::new(1, 1),
            false,
            BlockOrder::InOrder,
            |blk| {
                let s = SharedArray::<u32, 8>::new();
                blk.run_threads(|t| {
                    t.cp_async(&s, 0, &src, 0, 8);
                    t.cp_async_commit();
                    t.cp_async(&s, 4, &src, 8, 3);
                    t.cp_async_commit();
                    g.store(0, s.get(0));
                    t.cp_async_wait(1);
                    g.store(1, s.get(0));
                    g.store(2, s.get(5));
                    t.cp_async_wait(0);
                })?;
                assert_eq!(s.get(5), bits(10.0), "the second group landed at the wait");
                assert_eq!(s.get(6), 0, "zero-filled past n");
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(seen, vec![0, bits(1.0) << 16, 0]);
    }
}
