//! Native emulation of Hopper's tensor memory accelerator (TMA) in `#[kernel]` SIMT code:
//! shared-memory barriers that count arrivals and bytes (`mbarrier`), and 2-D box copies from
//! global to shared memory described by a [`TensorMap`] (`cp.async.bulk.tensor.2d`), landing
//! in the 128-byte swizzle that `wgmma` reads.
//!
//! A barrier's phase completes when every expected thread has arrived and every byte it was
//! told to expect has landed; a thread waits for a phase by its parity, as PTX's
//! `mbarrier.try_wait.parity` does. A box copy reads its source when it is issued and lands in
//! shared memory only when a thread waits on its barrier, so a kernel that reads a tile
//! before waiting for it reads stale data natively too, as on the GPU.
//!
//! Invariant: what PTX leaves undefined (a wait on a barrier never initialized, more
//! arrivals than expected, a box landing off a 1024-byte boundary or past its array) is a
//! panic natively, naming the intrinsic.

use super::LaunchError;
use super::block::{SharedArray, ThreadCtx};
use super::tensor_core::bits16;
use crate::Float;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Bytes of one row of a box: the widest the 128-byte swizzle takes (64 f16 or bf16
/// elements).
pub const TMA_BOX_ROW_BYTES: usize = 128;

/// A row-major 2-D view of a buffer of 16-bit elements that [`tma_load_2d`] copies boxes of:
/// `rows` rows of `cols` elements, `row_stride` elements apart, in boxes of `box_rows` rows
/// by 64 elements (128 bytes). On a GPU the launcher encodes it, with the buffer's address,
/// as the `CUtensorMap` the kernel's parameter takes (`cuTensorMapEncodeTiled`, 128-byte
/// swizzle, out-of-bounds elements read as zero).
///
/// [`tma_load_2d`]: ThreadCtx::tma_load_2d
///
/// ```
/// use rtx_kernels::kernel::TensorMap;
/// let m = TensorMap::new(128, 4096, 4096, 64).unwrap();
/// assert_eq!(m.box_bytes(), 64 * 128);
/// // Rows must start on 16-byte boundaries: 8 elements of 2 bytes.
/// assert!(TensorMap::new(128, 100, 100, 64).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorMap {
    /// Rows of the view.
    pub rows: usize,
    /// Elements of a row (the contiguous dim).
    pub cols: usize,
    /// Elements from the start of one row to the next.
    pub row_stride: usize,
    /// Rows of one box, 1 to 256.
    pub box_rows: u32,
}

impl TensorMap {
    /// A view of `rows x cols` elements, rows `row_stride` elements apart, copied in boxes of
    /// `box_rows` rows. Errors unless the hardware takes it: `row_stride` at least `cols` and
    /// a multiple of 8 (16 bytes), dims from 1 to 2^32, `box_rows` from 1 to 256.
    pub fn new(
        rows: usize,
        cols: usize,
        row_stride: usize,
        box_rows: u32,
    ) -> Result<Self, LaunchError> {
        let bad = |why: &str| {
            Err(LaunchError::new(format!(
                "tensor map of {rows} x {cols} elements, rows {row_stride} apart, boxes of \
                 {box_rows} rows: {why}"
            )))
        };
        if rows == 0 || cols == 0 || rows > 1 << 32 || cols > 1 << 32 {
            return bad("each dim must be 1 to 2^32");
        }
        if row_stride < cols || !row_stride.is_multiple_of(8) || row_stride >= 1 << 39 {
            return bad(
                "the row stride must be at least the row and a multiple of 8 elements \
                 (16 bytes), below 2^39",
            );
        }
        if box_rows == 0 || box_rows > 256 {
            return bad("a box has 1 to 256 rows");
        }
        Ok(TensorMap {
            rows,
            cols,
            row_stride,
            box_rows,
        })
    }

    /// Bytes one box copy brings (out-of-bounds elements count: they land as zeros), what a
    /// barrier is told to expect for it.
    pub fn box_bytes(&self) -> u32 {
        self.box_rows * TMA_BOX_ROW_BYTES as u32
    }
}

/// One barrier's state, kept beside the block's shared arrays (the `u64` cell the kernel
/// declares is its address on the GPU, unused natively).
pub(crate) struct Mbarrier {
    /// The shared array's cells and the index, which identify the barrier.
    key: (usize, usize),
    expected: usize,
    pending: usize,
    /// Bytes expected and not yet landed (negative while copies landed before the expectation
    /// was set, as PTX allows).
    tx: i64,
    completed: u64,
    copies: Vec<BoxCopy>,
}

impl Mbarrier {
    fn complete_if_done(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.completed += 1;
            self.pending = self.expected;
        }
    }
}

/// A box copy read at issue: its words and where they go.
struct BoxCopy {
    cells: Arc<[AtomicU64]>,
    words: Vec<(usize, u32)>,
    bytes: i64,
}

fn key<const N: usize>(bar: &SharedArray<u64, N>, i: usize) -> (usize, usize) {
    (Arc::as_ptr(&bar.cells) as *const AtomicU64 as usize, i)
}

impl ThreadCtx<'_> {
    /// Runs `f` on barrier `i` of `bar`; `f` says whether it made progress (the scheduler
    /// tells a hang by a round of its threads with none).
    #[track_caller]
    fn with_mbarrier<const N: usize, R>(
        &self,
        what: &str,
        bar: &SharedArray<u64, N>,
        i: usize,
        f: impl FnOnce(&mut Mbarrier) -> (R, bool),
    ) -> R {
        assert!(i < N, "{what}: barrier {i} of a {N}-barrier array");
        let sync = self
            .sync
            .expect("mbarrier intrinsics make the kernel run its threads together");
        let mut bars = sync.mbarriers.borrow_mut();
        let k = key(bar, i);
        let Some(b) = bars.iter_mut().find(|b| b.key == k) else {
            panic!("{what}: barrier {i} was never initialized (`mbarrier_init`)");
        };
        let (r, progress) = f(b);
        if progress {
            sync.progress.set(sync.progress.get() + 1);
        }
        r
    }

    /// `mbarrier.init.shared::cta.b64 [bar + 8 i], count`: a barrier whose phases complete
    /// after `count` arrivals (and the bytes they announce).
    #[track_caller]
    pub fn mbarrier_init<const N: usize>(&self, bar: &SharedArray<u64, N>, i: usize, count: usize) {
        assert!(i < N, "mbarrier_init: barrier {i} of a {N}-barrier array");
        assert!(
            (1..1 << 20).contains(&count),
            "mbarrier_init: an arrival count of {count} (PTX takes 1 to 2^20 - 1)"
        );
        let sync = self
            .sync
            .expect("mbarrier intrinsics make the kernel run its threads together");
        sync.progress.set(sync.progress.get() + 1);
        let mut bars = sync.mbarriers.borrow_mut();
        let k = key(bar, i);
        bars.retain(|b| b.key != k);
        bars.push(Mbarrier {
            key: k,
            expected: count,
            pending: count,
            tx: 0,
            completed: 0,
            copies: Vec::new(),
        });
    }

    /// `mbarrier.arrive.shared::cta.b64`: this thread's arrival at barrier `i`.
    #[track_caller]
    pub fn mbarrier_arrive<const N: usize>(&self, bar: &SharedArray<u64, N>, i: usize) {
        self.mbarrier_arrive_expect_tx(bar, i, 0);
    }

    /// `mbarrier.arrive.expect_tx.shared::cta.b64`: the phase also waits for `bytes` more
    /// bytes of copies, then this thread arrives.
    #[track_caller]
    pub fn mbarrier_arrive_expect_tx<const N: usize>(
        &self,
        bar: &SharedArray<u64, N>,
        i: usize,
        bytes: usize,
    ) {
        self.with_mbarrier("mbarrier_arrive", bar, i, |b| {
            assert!(
                b.pending > 0,
                "mbarrier_arrive: more arrivals at barrier {i} than the {} it counts",
                b.expected
            );
            b.tx += bytes as i64;
            b.pending -= 1;
            b.complete_if_done();
            ((), true)
        });
    }

    /// `mbarrier.try_wait.parity.shared::cta.b64` in a loop: waits until the phase of parity
    /// `parity` of barrier `i` has completed (the barrier's phase count is then of the other
    /// parity), landing the box copies that phase waits for.
    #[track_caller]
    pub fn mbarrier_wait<const N: usize>(
        &self,
        bar: &SharedArray<u64, N>,
        i: usize,
        parity: usize,
    ) {
        loop {
            let done = self.with_mbarrier("mbarrier_wait", bar, i, |b| {
                let landed = !b.copies.is_empty();
                for copy in std::mem::take(&mut b.copies) {
                    for (at, w) in copy.words {
                        copy.cells[at].store(u64::from(w), Relaxed);
                    }
                    b.tx -= copy.bytes;
                }
                b.complete_if_done();
                (b.completed % 2 != (parity % 2) as u64, landed)
            });
            if done {
                return;
            }
            self.suspend();
        }
    }

    /// `cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes`:
    /// copies the box of `map.box_rows` rows by 64 elements whose first element is row
    /// `row`, column `col` of `map`'s view of `src` into `tile` from word `word` on, in the
    /// 128-byte swizzle (16-byte chunk `c` of box row `r` at chunk `c ^ (r % 8)` of its
    /// 128-byte row), elements outside the view as zeros, and counts its bytes towards
    /// barrier `i`'s phase. `word` must start a 1024-byte swizzle group.
    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    pub fn tma_load_2d<T: Float, const N: usize, const B: usize>(
        &self,
        tile: &SharedArray<u32, N>,
        word: usize,
        src: &[T],
        map: TensorMap,
        col: usize,
        row: usize,
        bar: &SharedArray<u64, B>,
        i: usize,
    ) {
        let rows = map.box_rows as usize;
        assert!(
            word.is_multiple_of(256) && word + rows * 32 <= N,
            "tma_load_2d: a box of {rows} rows at word {word} is not 1024-byte aligned inside \
             the {N}-word array"
        );
        let elem = |r: usize, c: usize| -> u32 {
            if r < map.rows && c < map.cols {
                u32::from(bits16(src[r * map.row_stride + c]))
            } else {
                0
            }
        };
        let mut words = Vec::with_capacity(rows * 32);
        for r in 0..rows {
            for w in 0..32 {
                let c = col + 2 * w;
                let v = elem(row + r, c) | (elem(row + r, c + 1) << 16);
                // The chunk (4 words) is swapped by the row within the 8-row group.
                let at = word + r * 32 + ((w / 4) ^ (r % 8)) * 4 + w % 4;
                words.push((at, v));
            }
        }
        self.with_mbarrier("tma_load_2d", bar, i, |b| {
            b.copies.push(BoxCopy {
                cells: Arc::clone(&tile.cells),
                words,
                bytes: i64::from(map.box_bytes()),
            });
            ((), true)
        });
    }
}
