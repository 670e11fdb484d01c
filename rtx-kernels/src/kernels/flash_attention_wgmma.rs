//! Fused attention forward on Hopper's warpgroup products (`wgmma`), in the manner of
//! FlashAttention-3 without its producer warpgroup: the same computation, operands, layout
//! and masks as [`flash_attn_fwd()`](super::flash_attn_fwd) (whose documentation says what
//! each argument means), for head dims 64 and 128 on GPUs of compute capability 9.0.
//!
//! Each block of one or two warpgroups takes 64 query rows a warpgroup, and streams 128-key
//! tiles of K and V through shared memory, double-buffered or (one warpgroup at head dim 128,
//! where few tiles are to come) single-buffered. Per tile a warpgroup computes its
//! 64 x 128 scores with `wgmma_m64n128k16` (Q and K both K-major tiles), runs the online
//! softmax on them in registers, and adds `P V` with `wgmma_rs_m64n{d}k16`: the probabilities
//! go from the scores' accumulator straight into A fragments, and V's rows are read as an
//! N-major tile, so V is copied as it lies. One `wgmma` instruction does the work of 16 to 32
//! `mma.sync`s, which frees the issue slots the softmax needs.
//!
//! Short sequences take blocks of one warpgroup ([`FlashWgmmaPlan`]): at 256 keys a block
//! runs one or two key tiles, so its copies in and its stores weigh more than its products,
//! and only several blocks to a multiprocessor hide one block's copies under another's
//! products (three at d 64, held to 168 registers by the entry's launch bounds). A block
//! starts tile 1's copy right behind Q's and tile 0's, and waits for those alone before its
//! first products. Two warpgroups share each K and V tile, which halves the copies of long
//! rows.
//!
//! Invariant: every size works, as for [`flash_attn_fwd()`](super::flash_attn_fwd): rows past
//! `t_q` are zero-filled and not stored, keys past the valid length are zero-filled and get
//! probability 0 exactly.

use crate::Float;
use crate::kernel::LaunchConfig;
use rtx_macros::kernel;

/// Keys per step of [`flash_attn_fwd_wgmma()`]'s loop.
pub const FLASH_ATTN_WGMMA_BLOCK_K: usize = 128;
/// Rows of keys up to which [`FlashWgmmaPlan::for_keys`] takes blocks of one warpgroup.
pub const FLASH_ATTN_WGMMA_SHORT_KEYS: usize = 512;

/// Whether [`flash_attn_fwd_wgmma()`] takes head dim `d` (64 or 128).
pub fn flash_attn_wgmma_takes(d: usize) -> bool {
    d == 64 || d == 128
}

/// How a launch of [`flash_attn_fwd_wgmma()`] is shaped: warpgroups a block (64 query rows
/// each) and K/V buffers (2: the next tile is copied under the current one's products; 1:
/// after them), which together set the shared memory a block takes and so how many blocks
/// share a multiprocessor.
///
/// ```
/// use rtx_kernels::kernels::FlashWgmmaPlan;
/// // Long rows: two warpgroups share double-buffered tiles, 160 KiB at d 128.
/// let long = FlashWgmmaPlan::for_keys(4096, 128);
/// assert_eq!((long.warpgroups, long.stages, long.shared_bytes(128)), (2, 2, 160 * 1024));
/// // 256 keys at d 64: one warpgroup in 72 KiB, three blocks to a multiprocessor (the entry's
/// // launch bounds hold it to 168 registers a thread).
/// let short = FlashWgmmaPlan::for_keys(256, 64);
/// assert_eq!((short.warpgroups, short.shared_bytes(64)), (1, 72 * 1024));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashWgmmaPlan {
    /// Warpgroups a block, 1 or 2.
    pub warpgroups: u32,
    /// K and V buffers, 1 or 2.
    pub stages: usize,
}

impl FlashWgmmaPlan {
    /// The plan for rows of `t_k` keys at head dim `d`: one warpgroup up to
    /// [`FLASH_ATTN_WGMMA_SHORT_KEYS`] keys (single-buffered at d 128, so two blocks fit a
    /// multiprocessor; double-buffered at d 64, where three do), two double-buffered past it.
    pub fn for_keys(t_k: usize, d: usize) -> Self {
        match (t_k <= FLASH_ATTN_WGMMA_SHORT_KEYS, d) {
            (true, 128) => FlashWgmmaPlan {
                warpgroups: 1,
                stages: 1,
            },
            (true, _) => FlashWgmmaPlan {
                warpgroups: 1,
                stages: 2,
            },
            _ => FlashWgmmaPlan::LONG_ROWS,
        }
    }

    /// The plan for long rows: two warpgroups (128 query rows a block) sharing each
    /// double-buffered K and V tile.
    pub const LONG_ROWS: FlashWgmmaPlan = FlashWgmmaPlan {
        warpgroups: 2,
        stages: 2,
    };

    /// Bytes of shared memory a block takes at head dim `d`: each K and V buffer 128 rows of
    /// `d` 16-bit elements, and Q's 64 rows a warpgroup.
    pub fn shared_bytes(&self, d: usize) -> u32 {
        let words = 2 * self.stages * 64 * d + 32 * self.warpgroups as usize * d;
        (4 * words) as u32
    }

    /// The launch over `batch x heads` rows of `t_q` queries: a grid of `ceil(t_q / rows) x
    /// heads x batch` blocks of 128 threads a warpgroup (`rows` = 64 a warpgroup).
    pub fn launch(&self, batch: usize, heads: usize, t_q: usize) -> LaunchConfig {
        LaunchConfig::new(
            (
                t_q.div_ceil(64 * self.warpgroups as usize) as u32,
                heads as u32,
                batch as u32,
            ),
            128 * self.warpgroups,
        )
    }
}

/// Attention forward on `wgmma`, f16 or bf16: [`flash_attn_fwd()`](super::flash_attn_fwd)'s
/// results (the same arguments, layout and masks) for `d` 64 or 128, in blocks of
/// `warpgroups` (1 or 2) warpgroups with `stages` (1 or 2) K and V buffers, launched as that
/// [`FlashWgmmaPlan`] says (its grid, blocks and shared memory). On a GPU it needs compute
/// capability 9.0.
///
/// Shared memory, one region after another in one array: `stages` buffers of K (128 rows of
/// `d` elements each), as many of V, then Q's 64 rows a warpgroup; at most 160 KiB (two
/// warpgroups, two stages, d 128), 72 KiB for one warpgroup at d 64. Every tile is stored as
/// 64-column panels of 128-byte rows in the 128-byte swizzle (16-byte chunk `c` of row `r` at
/// chunk `c ^ (r % 8)`), a K or V tile's panel `p` 4096 words on: the K-major layout `wgmma`
/// reads Q and K in, and the N-major one it reads V in.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernels::{flash_attn_dense_strides, flash_attn_fwd_wgmma, FlashWgmmaPlan};
/// let (t, d) = (2, 64);
/// let q = vec![bf16::ZERO; t * d];
/// let k = q.clone();
/// // Value rows of 1s and 3s: with equal scores, each output is their mean.
/// let v: Vec<bf16> = (0..t * d).map(|i| bf16::from_f32(1.0 + 2.0 * (i / d) as f32)).collect();
/// let (mut o, mut lse) = (vec![bf16::ZERO; t * d], vec![0.0f32; t]);
/// let (launch, s) = (FlashWgmmaPlan::LONG_ROWS.launch(1, 1, t), flash_attn_dense_strides(1, t, d));
/// flash_attn_fwd_wgmma(launch, &q, &k, &v, &mut o, &mut lse, &[], s, s, s, 1, 1, t, t, d, 0.125, 1, 0, 2, 2)
///     .unwrap();
/// // Causal: the first query sees the first key alone, the second both.
/// assert_eq!((o[0].to_f32(), o[d].to_f32(), lse[0]), (1.0, 2.0, 0.0));
/// ```
#[kernel(
    crate = crate,
    specialize(d = 64, 128),
    specialize(warpgroups = 1, 2),
    launch_bounds(256, 1),
    launch_bounds(128, 3, d = 64, warpgroups = 1)
)]
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_fwd_wgmma<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    o: &mut [T],
    lse: &mut [T::Acc],
    key_len: &[u32],
    qs: KernelStrides,
    ks: KernelStrides,
    os: KernelStrides,
    batch: usize,
    heads: usize,
    t_q: usize,
    t_k: usize,
    d: usize,
    scale: f64,
    causal: u32,
    padded: u32,
    warpgroups: usize,
    stages: usize,
) {
    // Tile `j`'s K in buffer `j % stages` (`kw` words each: a panel of 128 rows of 32 words
    // per 64 columns), its V `stages` buffers on, then Q's rows in panels of `bq` rows.
    #[shared]
    let sm: [u32; 40960];
    // The block's threads, as the plan launched them (a constant in each entry, so the copy
    // loops below fold).
    let threads = (128 * warpgroups) as u32;
    let tid = thread_idx_x() as u32;
    let wg = tid / 128;
    let t = tid % 128;
    let lane = t % 32;
    let warp = t / 32;
    let hh = block_idx_y();
    let n = block_idx_z();
    let bq = 64 * warpgroups;
    let kw = 64 * d;
    let v_at = stages * kw;
    let q_at = 2 * stages * kw;
    let q_panel = 32 * bq;
    // Causal blocks further down have more keys: the longest start first.
    let bx = if causal != 0 {
        grid_dim_x() - 1 - block_idx_x()
    } else {
        block_idx_x()
    };
    let m0 = bx * bq;
    if n >= batch || hh >= heads || m0 >= t_q {
        return;
    }
    let b = n * heads + hh;
    let q0 = n * qs.stride(0) + hh * qs.stride(1);
    let q_rs = qs.stride(2);
    let k0 = n * ks.stride(0) + hh * ks.stride(1);
    let k_rs = ks.stride(2);
    let scale = scale as T;
    let scale2 = scale * 1.4426950408889634;
    let is_causal = causal != 0;
    let mut kl = t_k;
    if padded != 0 {
        kl = kl.min(key_len[b] as usize);
    }
    let mut n_end = kl;
    if is_causal {
        let lim = (m0 + bq).min(t_q) + t_k;
        n_end = if lim > t_q { n_end.min(lim - t_q) } else { 0 };
    }
    let tiles = (n_end + 127) / 128;

    // Copies: a row is `d / 8` 16-byte chunks; this thread copies chunk `cc` of rows `cr +
    // rstep i` (up to 16 passes: one warpgroup at d 128). Chunk `cc` lies in panel `cc / 8`, at chunk `(cc % 8) ^ (row % 8)` of its row,
    // and every row this thread copies is `cr` mod 8.
    let cpr = (d / 8) as u32;
    let cc = tid % cpr;
    let cr = tid / cpr;
    let rstep = threads / cpr;
    let passes = 128 / rstep;
    let q_passes = (bq as u32) / rstep;
    let c_row = cr * 32 + ((cc % 8) ^ (cr % 8)) * 4;
    let c_dst = (cc / 8) * 4096 + c_row;
    let q_dst = (q_at as u32) + (cc / 8) * (q_panel as u32) + c_row;
    let q_src = q0 + (m0 + cr as usize) * q_rs + (cc * 8) as usize;
    let k_at = k0 + (cr as usize) * k_rs + (cc * 8) as usize;
    let q_pass = (rstep as usize) * q_rs;
    let k_pass = (rstep as usize) * k_rs;
    for i in 0..16 {
        let r = cr + (i as u32) * rstep;
        let dst = (c_dst + (i as u32) * rstep * 32) as usize;
        if (i as u32) < q_passes {
            let lq = if m0 + (r as usize) < t_q { 8 } else { 0 };
            let qd = (q_dst + (i as u32) * rstep * 32) as usize;
            cp_async(&mut sm, qd, q, q_src + (i as usize) * q_pass, lq);
        }
        if (i as u32) < passes {
            let len = if (r as usize) < n_end { 8 } else { 0 };
            cp_async(&mut sm, dst, k, k_at + (i as usize) * k_pass, len);
            cp_async(&mut sm, v_at + dst, v, k_at + (i as usize) * k_pass, len);
        }
    }
    cp_async_commit();

    // Accumulator element `i`: row `g + 8 ((i / 2) % 2)` of this warp's 16, column
    // `8 (i / 4) + 2 t4 + i % 2`. This lane's two rows are `row0` and `row0 + 8`.
    let g = lane / 4;
    let t4 = lane % 4;
    let row0 = m0 + (wg * 64 + warp * 16 + g) as usize;
    // This warpgroup's 64 rows of Q start 2048 words into each of Q's panels.
    let q_tile = q_at + (wg as usize) * 2048;
    let mut acc = [0.0; 64];
    let mut s = [0.0; 64];
    let mut pf = [0u32; 32];
    let mut row_max = [T::NEG_INFINITY; 2];
    let mut row_sum = [0.0; 2];
    let mut alpha = [0.0; 2];
    let mut lim = [0usize; 2];

    let mut j = 0;
    while j < tiles {
        let n0 = j * 128;
        let kb = (j % stages) * kw;
        // Tile `c` goes to buffer `c % stages` once no warpgroup reads that buffer: with
        // two stages tile 1 at once (its buffer is still unused), so it is on its way while
        // the first step waits for Q and tile 0 alone, and each later tile after the barrier
        // below, under this tile's products; with one stage each tile after it (tile 0 came
        // with Q).
        let c = j + stages - 1;
        let early = stages == 2 && j == 0;
        // Unless early: what was copied has landed for every thread and is visible to the
        // tensor cores, and every warpgroup is done with tile `j - 1`, whose buffer the
        // copies below overwrite.
        if !early {
            cp_async_wait(0);
            fence_proxy_async();
            sync_threads();
        }
        if c < tiles && c > 0 {
            let nb = (c % stages) * kw;
            let k_next = k_at + c * 128 * k_rs;
            for i in 0..16 {
                if (i as u32) < passes {
                    let r = c * 128 + (cr + (i as u32) * rstep) as usize;
                    let dst = nb + (c_dst + (i as u32) * rstep * 32) as usize;
                    let len = if r < n_end { 8 } else { 0 };
                    cp_async(&mut sm, dst, k, k_next + (i as usize) * k_pass, len);
                    cp_async(&mut sm, v_at + dst, v, k_next + (i as usize) * k_pass, len);
                }
            }
        }
        cp_async_commit();
        if early {
            cp_async_wait(1);
            fence_proxy_async();
            sync_threads();
        }
        if stages == 1 {
            cp_async_wait(0);
            fence_proxy_async();
            sync_threads();
        }

        // S = Q K^T, 64 x 128 for this warpgroup. A 16-wide step along d is 8 words along a
        // panel's rows; steps 4 to 7 are in the second panel.
        for x in 0..64 {
            s[x] = 0.0;
        }
        wgmma_fence();
        for kk in 0..8 {
            if kk * 16 < d {
                let step = ((kk / 4) * 4096 + (kk % 4) * 8) as u32;
                let q_step = (kk / 4) * q_panel + (kk % 4) * 8;
                wgmma_m64n128k16(&mut s, 0, &sm, q_tile + q_step, &sm, kb + step as usize);
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut s);

        // Masks, only on tiles that cross the valid length or the diagonal: each of this
        // lane's rows sees the keys below its own limit, so a masked element costs one compare.
        if n0 + 128 > kl || (is_causal && n0 + 127 + t_q > m0 + t_k) {
            for h in 0..2 {
                let seen = row0 + 8 * h + t_k + 1;
                lim[h] = if !is_causal {
                    kl
                } else if seen > t_q {
                    kl.min(seen - t_q)
                } else {
                    0
                };
            }
            for i in 0..64 {
                let col = n0 + 8 * (i / 4) + (t4 * 2) as usize + i % 2;
                if col >= lim[(i / 2) % 2] {
                    s[i] = T::NEG_INFINITY;
                }
            }
        }

        // Online softmax for this lane's two rows, the maximum over the 4 lanes of a row.
        for h in 0..2 {
            let mut mx = row_max[h];
            for nt in 0..16 {
                mx = mx.max(s[nt * 4 + h * 2]).max(s[nt * 4 + h * 2 + 1]);
            }
            mx = mx.max(warp_shuffle_xor(mx, 1));
            mx = mx.max(warp_shuffle_xor(mx, 2));
            let base = if mx == T::NEG_INFINITY {
                0.0
            } else {
                mx * scale2
            };
            alpha[h] = (row_max[h] * scale2 - base).exp2();
            row_max[h] = mx;
            let mut sum = 0.0;
            for nt in 0..16 {
                for e in 0..2 {
                    let p = (s[nt * 4 + h * 2 + e] * scale2 - base).exp2();
                    s[nt * 4 + h * 2 + e] = p;
                    sum += p;
                }
            }
            row_sum[h] = row_sum[h] * alpha[h] + sum;
        }

        // ANCHOR: pv
        // P as A fragments: key step `kk` is accumulator elements `8 kk..8 kk + 8`, paired.
        for kk in 0..8 {
            for r in 0..4 {
                pf[kk * 4 + r] = pack2(s[kk * 8 + 2 * r], s[kk * 8 + 2 * r + 1]);
            }
        }
        for x in 0..64 {
            if 8 * (x / 4) < d {
                acc[x] *= alpha[(x / 2) % 2];
            }
        }
        // O += P V: 16 keys are two 8-row groups of each panel, 512 words.
        wgmma_fence();
        for kk in 0..8 {
            let vw = v_at + kb + kk * 512;
            if d == 128 {
                wgmma_rs_m64n128k16(&mut acc, 0, &pf, kk * 4, &sm, vw, 4096);
            } else {
                wgmma_rs_m64n64k16(&mut acc, 0, &pf, kk * 4, &sm, vw, 4096);
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut acc);
        // ANCHOR_END: pv
        j += 1;
    }
    // Nothing may be left in flight (a block with no tile never waited).
    cp_async_wait(0);

    let o0 = n * os.stride(0) + hh * os.stride(1);
    let o_rs = os.stride(2);
    for h in 0..2 {
        let mut l = row_sum[h];
        l += warp_shuffle_xor(l, 1);
        l += warp_shuffle_xor(l, 2);
        let row = row0 + h * 8;
        let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
        if row < t_q {
            let o_row = o0 + row * o_rs + (t4 * 2) as usize;
            for nt in 0..16 {
                if nt * 8 < d {
                    let lo = acc[nt * 4 + h * 2] * inv;
                    let hi = acc[nt * 4 + h * 2 + 1] * inv;
                    store2(o, o_row + nt * 8, lo, hi);
                }
            }
            if t4 == 0 {
                lse[b * t_q + row] = if l > 0.0 {
                    row_max[h] * scale + l.ln()
                } else {
                    T::NEG_INFINITY
                };
            }
        }
    }
}
