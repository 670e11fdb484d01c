//! Fused attention forward on the tensor cores, written with `#[kernel]` in the manner of
//! FlashAttention-2: `o = softmax(scale q k^T) v` for one 64-row block of queries at a time,
//! streaming 64-key tiles of K and V through shared memory with an online softmax, so the
//! `t_q x t_k` score matrix never leaves registers. It also writes each row's log-sum-exp, which
//! a backward pass needs to recompute the probabilities.
//!
//! Layout: the kernels (this forward and the backward's three) take each operand as
//! `[batch, heads, t, d]` with its own batch, head and row strides in elements and the head dim
//! contiguous, grouped by what is read or written alike: a q group (`q`, `dq`), a k group
//! (`k`, `v`, `dk`, `dv`) and an o group (`o`, `dout`), each passed as a [`KernelStrides`]
//! (see [`flash_attn_strides`]). So q, k and v can be read in place from a fused projection's
//! `[batch, t, 3 heads d]` output, `o` written as `[batch, t, heads d]` ready for the output
//! projection, and the gradients written straight into the projection's gradient; the dense
//! `[batch heads, t, d]` buffers are the case [`flash_attn_dense_strides`]. The log-sum-exp and
//! the backward's row sums stay dense `[batch heads, t_q]` f32s.
//!
//! Invariant: every size works. Query rows past `t_q` are zero-filled in shared memory and not
//! stored; keys past the valid length (`t_k`, the row's padding length, the causal diagonal)
//! are zero-filled and their scores set to -inf before the softmax, so they get probability 0
//! exactly.

use crate::Float;
use crate::kernel::{KernelStrides, LaunchConfig};
use rtx_macros::kernel;

/// Threads per block of [`flash_attn_fwd()`]: 4 warps, each owning 16 query rows per row tile.
pub const FLASH_ATTN_THREADS: u32 = 128;
/// Keys per step of [`flash_attn_fwd()`]'s loop (one K tile and one V tile in shared memory).
pub const FLASH_ATTN_BLOCK_K: usize = 64;
/// The largest head dim [`flash_attn_fwd()`] takes; `d` is a multiple of 16 up to it.
pub const FLASH_ATTN_MAX_D: usize = 128;

/// Query rows per block of [`flash_attn_fwd()`]: two row tiles of 16 for each of its 4 warps.
pub const FLASH_ATTN_BLOCK_Q: usize = 128;

/// The launch of [`flash_attn_fwd()`] over `batch x heads` rows of `t_q` queries: a grid of
/// `ceil(t_q / 128) x heads x batch` blocks of [`FLASH_ATTN_THREADS`] threads (the head and
/// the batch element are the block's y and z, so no thread divides to find them).
pub fn flash_attn_launch(batch: usize, heads: usize, t_q: usize) -> LaunchConfig {
    LaunchConfig::new(
        (
            t_q.div_ceil(FLASH_ATTN_BLOCK_Q) as u32,
            heads as u32,
            batch as u32,
        ),
        FLASH_ATTN_THREADS,
    )
}

/// The strides of one operand group of the attention kernels, `[batch, head, row]` in
/// elements (the head dim is contiguous), as the [`KernelStrides`] they take. Its offset is not
/// read: the operands of a group may sit at different offsets of one buffer (k and v in a fused
/// projection's output), so each buffer passed starts at its operand's first element.
///
/// ```
/// use rtx_kernels::kernels::flash_attn_strides;
/// // Queries read in place from a [batch, 256, 3 * 512] projection, heads of 64.
/// let s = flash_attn_strides([256 * 1536, 64, 1536]);
/// assert_eq!(s.strides[..3], [256 * 1536, 64, 1536]);
/// ```
pub fn flash_attn_strides([batch, head, row]: [usize; 3]) -> KernelStrides {
    let mut s = KernelStrides::default();
    s.strides[..3].copy_from_slice(&[batch as i64, head as i64, row as i64]);
    s
}

/// [`flash_attn_strides`] of dense `[batch, heads, t, d]` buffers, that is `[batch heads, t, d]`.
///
/// ```
/// use rtx_kernels::kernels::flash_attn_dense_strides;
/// assert_eq!(flash_attn_dense_strides(8, 256, 64).strides[..3], [8 * 256 * 64, 256 * 64, 64]);
/// ```
pub fn flash_attn_dense_strides(heads: usize, t: usize, d: usize) -> KernelStrides {
    flash_attn_strides([heads * t * d, t * d, d])
}

/// Attention forward, f16 or bf16, on the tensor cores: for each of the `batch x heads` rows,
/// `o = softmax(scale q k^T) v` with `q` `[t_q, d]`, `k` and `v` `[t_k, d]` and `o`
/// `[t_q, d]`; and `lse[batch heads, t_q]` (f32, dense), the natural log of the sum of
/// `exp(scale q_i . k_j)` over the keys row `i` attends to, for the backward.
///
/// Layout (see the module's documentation): element `c` of row `i` of head `h` of batch
/// element `n` is at `n s[0] + h s[1] + i s[2] + c` of its buffer, with `s` the strides of its
/// group: `qs` for `q`, `ks` for `k` and `v`, `os` for `o`. Dense `[batch heads, t, d]`
/// buffers take [`flash_attn_dense_strides`]. The strides and each buffer's start are
/// multiples of 8 elements (16 bytes), as the tile copies need; `o`'s rows must not overlap.
///
/// Masks: with `causal` non-zero, query `i` attends to keys `j <= i + t_k - t_q` (the diagonal
/// aligned to the bottom right, as FlashAttention's; `j <= i` when `t_q == t_k`). With `padded`
/// non-zero, `key_len[b]` (`batch heads` values) is the valid key count of row `b = n heads + h`
/// (head `h` of batch element `n`): keys `j >= key_len[b]` are masked (a length of `t_k` or
/// more masks nothing); with `padded` zero `key_len` is not read
/// (pass `&[]` natively, any pointer on the GPU). A query row left with no key writes zeros to
/// `o` and -inf to `lse`.
///
/// `d` is a runtime value, a multiple of 16 up to [`FLASH_ATTN_MAX_D`] (64 and 128 are the
/// sizes it is built for): the per-thread fragments are sized for 128 and the steps past `d`
/// skipped by branches uniform over the grid, so every index into them stays a constant after
/// unrolling and they stay in registers. `scale` is positive (usually `1 / sqrt(d)`); it is an
/// `f64` so that natively it is not rounded to `T` (the kernel computes with it in f32). Launch
/// it with [`flash_attn_launch`].
///
/// Each block of 4 warps takes 128 query rows of one head of one batch element: each warp owns
/// two row tiles of 16, so each K and V fragment it reads feeds two products (as
/// FlashAttention-2's 128-row blocks do). Q's rows stay in shared memory for the whole loop; up
/// to a d of 64 a warp also holds its rows as `mma` A fragments in registers, past it it reads
/// them per step. Causal blocks run the last rows (the most keys) first. Per 64-key step, a
/// warp computes its 16 x 64 scores per row tile with `mma_m16n8k16` (K's rows read by `ldmatrix` are the B
/// fragments of `k^T`), takes the row maximum across the 4 lanes that share a row, rescales its
/// running output and sum, and multiplies the probabilities, rounded to `T` as FlashAttention
/// does, by V (read transposed by `ldmatrix`): the score accumulator's layout is the A
/// fragment's, so the probabilities never go through shared memory. Output and sums stay in
/// f32 until the output is rounded once on store. K and V are double-buffered: the next
/// tile's copy runs under the whole of the current tile's math, with one barrier a tile.
/// Key tiles above the causal diagonal, or past the valid length, are skipped. Shared tiles
/// (two of K and two of V, 64 rows of 128 elements, 16 KiB each, and Q's 128 rows, 32 KiB; 96
/// KiB in all, so two blocks share an SM) are swizzled (16-byte chunk `c` of row `r` stored at
/// `c ^ (r % 8)`), so the 8 rows an
/// `ldmatrix` reads lie in different banks.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernels::{flash_attn_dense_strides, flash_attn_fwd, flash_attn_launch};
/// let (t, d) = (2, 16);
/// let q = vec![bf16::ZERO; t * d];
/// let k = q.clone();
/// // Value rows of 1s and 3s: with equal scores, each output is their mean.
/// let v: Vec<bf16> = (0..t * d).map(|i| bf16::from_f32(1.0 + 2.0 * (i / d) as f32)).collect();
/// let (mut o, mut lse) = (vec![bf16::ZERO; t * d], vec![0.0f32; t]);
/// let (launch, s) = (flash_attn_launch(1, 1, t), flash_attn_dense_strides(1, t, d));
/// flash_attn_fwd(launch, &q, &k, &v, &mut o, &mut lse, &[], s, s, s, 1, 1, t, t, d, 0.25, 0, 0)
///     .unwrap();
/// assert_eq!(o[0].to_f32(), 2.0);
/// assert_eq!(lse[0], 2f32.ln());
/// // Causal: the first query sees the first key alone.
/// flash_attn_fwd(launch, &q, &k, &v, &mut o, &mut lse, &[], s, s, s, 1, 1, t, t, d, 0.25, 1, 0)
///     .unwrap();
/// assert_eq!((o[0].to_f32(), o[d].to_f32(), lse[0]), (1.0, 2.0, 0.0));
/// ```
// ANCHOR: specialize
#[kernel(crate = crate, specialize(d = 64, 128))]
// ANCHOR_END: specialize
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_fwd<T: Float>(
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
) {
    // Two tiles each of K and V (tile `j` in buffer `j % 2`, the next one landing while it is
    // used): 64 rows of 64 words (128 elements, the largest d), so a row's 16-byte chunks can
    // be swizzled within it whatever d is; and the block's 128 rows of Q, which stay for the
    // whole loop. 96 KiB in all (so dynamic: `#[kernel]` sees to it), two blocks to an SM.
    #[shared]
    let sk: [u32; 8192];
    #[shared]
    let sv: [u32; 8192];
    #[shared]
    let sq: [u32; 8192];
    // Index arithmetic within the block is 32-bit (one instruction a step where `usize` takes
    // two); only offsets into the buffers are `usize`.
    let tid = thread_idx_x() as u32;
    let lane = tid % 32;
    let warp = tid / 32;
    let hh = block_idx_y();
    let n = block_idx_z();
    // Two row tiles of 16 per warp, so each K and V fragment read feeds two products. Up to a
    // d of 64 the warp holds its rows of Q in registers; past it they are read from `sq` per
    // step (the registers go to the output accumulators).
    let q_in_regs = d <= 64;
    let bq = 128;
    // Causal blocks further down have more keys: the grid's first blocks take the last rows,
    // so the longest blocks start first and the short ones fill in at the end.
    let bx = if causal != 0 {
        grid_dim_x() - 1 - block_idx_x()
    } else {
        block_idx_x()
    };
    let m0 = bx * bq;
    // The whole block leaves together, before any barrier.
    if n >= batch || hh >= heads || m0 >= t_q {
        return;
    }
    // The row's index among the `batch heads` (for `lse` and `key_len`), and where its head
    // starts in each buffer.
    let b = n * heads + hh;
    let q0 = n * qs.stride(0) + hh * qs.stride(1);
    let q_rs = qs.stride(2);
    let k0 = n * ks.stride(0) + hh * ks.stride(1);
    let k_rs = ks.stride(2);
    // Probabilities are exp2(s scale log2(e) - max scale log2(e)): one multiply-add and one
    // hardware exp2 each.
    let scale = scale as T;
    let scale2 = scale * 1.4426950408889634;
    let is_causal = causal != 0;
    // Keys this block reads: the valid ones, up to the causal limit of its last row (row `i`
    // sees keys `j` with `j + t_q <= i + t_k`).
    let mut kl = t_k;
    if padded != 0 {
        kl = kl.min(key_len[b] as usize);
    }
    let mut n_end = kl;
    if is_causal {
        let lim = (m0 + bq).min(t_q) + t_k;
        n_end = if lim > t_q { n_end.min(lim - t_q) } else { 0 };
    }
    let tiles = (n_end + 63) / 64;

    // Tile copies: a row of d elements is `d / 8` 16-byte chunks; this thread copies chunk `cc`
    // of rows `cr + i rstep`, with `cpr` (chunks per row, rounded up to a power of two) threads
    // to a row, so every thread copies for d 64 as for d 128. Each row it copies is `cr` mod
    // 8, so its swizzled place is chunk `cc ^ (cr % 8)` of the row.
    let cpr = if d <= 16 {
        2u32
    } else if d <= 32 {
        4u32
    } else if d <= 64 {
        8u32
    } else {
        16u32
    };
    let cc = tid % cpr;
    let cr = tid / cpr;
    let rstep = 128 / cpr;
    let passes = 64 / rstep;
    let c_on = ((cc * 8) as usize) < d;
    let c_dst = cr * 64 + (cc ^ (cr % 8)) * 4;
    let q_at = q0 + (m0 + cr as usize) * q_rs + (cc * 8) as usize;
    let k_at = k0 + (cr as usize) * k_rs + (cc * 8) as usize;
    let q_pass = (rstep as usize) * q_rs;
    let k_pass = (rstep as usize) * k_rs;
    // Q's rows and the first K and V tiles, in one group.
    for i in 0..16 {
        if (i as u32) < passes * 2 && c_on {
            let r = cr + (i as u32) * rstep;
            let dst = (c_dst + (i as u32) * rstep * 64) as usize;
            let len = if m0 + (r as usize) < t_q { 8 } else { 0 };
            cp_async(&mut sq, dst, q, q_at + (i as usize) * q_pass, len);
        }
        if i < 8 && (i as u32) < passes && c_on {
            let r = cr + (i as u32) * rstep;
            let dst = (c_dst + (i as u32) * rstep * 64) as usize;
            let len = if (r as usize) < n_end { 8 } else { 0 };
            cp_async(&mut sk, dst, k, k_at + (i as usize) * k_pass, len);
            cp_async(&mut sv, dst, v, k_at + (i as usize) * k_pass, len);
        }
    }
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();

    // `ldmatrix` addressing: this lane gives row `r8` of matrix `quad`; every row it names is
    // r8 mod 8, so its chunks are swizzled by `r8`.
    let quad = lane / 8;
    let r8 = lane % 8;
    // Q, A fragments (16 x 16 per step of 16 along d) of row tile `mi`: row `(quad % 2) * 8 +
    // r8` of the warp's 16 in the tile (64 rows on for `mi` 1), chunk `2 ks + quad / 2`. Held
    // at `(4 mi + ks) 4` when in registers (d <= 64), else read per step into `(4 mi) 4`.
    let mut qf = [0u32; 32];
    let q_row = (warp * 16 + (quad % 2) * 8 + r8) * 64;
    if q_in_regs {
        for mi in 0..2 {
            for ks in 0..4 {
                if ks * 16 < d {
                    let ch = (2 * (ks as u32) + quad / 2) ^ r8;
                    let word = q_row + (mi as u32) * 4096 + ch * 4;
                    ldmatrix_x4(&mut qf, (mi * 4 + ks) * 4, &sq, word as usize);
                }
            }
        }
    }
    // K, B fragments of k^T (16 along d x 8 keys), two key tiles per `ldmatrix_x4`: key row
    // `np * 16 + (quad / 2) * 8 + r8`, chunk `2 ks + quad % 2`.
    let k_row = ((quad / 2) * 8 + r8) * 64;
    // V, B fragments (16 keys x 8 along d) read transposed, two d tiles per `ldmatrix_x4`: key
    // row `kk * 16 + (quad % 2) * 8 + r8`, chunk `2 dp + quad / 2`.
    let v_row = ((quad % 2) * 8 + r8) * 64;

    // Accumulator element `i` of a tile is row `g + 8 (i / 2)`, column `2 t4 + i % 2`: this
    // lane holds query rows `row0 + 64 mi` and `row0 + 64 mi + 8` of each row tile `mi`, and
    // shares each with the 3 other lanes of its quad. Row tile `mi`'s scores start at `s[32
    // mi]`, its output at `acc[64 mi]`, its probabilities at `pf[16 mi]`, and its rows'
    // softmax state at `[2 mi]`.
    let g = lane / 4;
    let t4 = lane % 4;
    let row0 = m0 + (warp * 16 + g) as usize;
    let mut acc = [0.0; 128];
    let mut s = [0.0; 64];
    let mut kf = [0u32; 16];
    let mut pf = [0u32; 32];
    let mut vf = [0u32; 4];
    // Per row: the running maximum of the raw scores, and this lane's part of the sum of
    // exp(scale (s - max)) (the quad's parts are added once, at the end).
    let mut row_max = [T::NEG_INFINITY; 4];
    let mut row_sum = [0.0; 4];
    let mut alpha = [0.0; 4];

    let mut j = 0;
    while j < tiles {
        let n0 = j * 64;
        // Tile `j`'s K and V sit in buffer `j % 2`.
        let kb = ((j % 2) * 4096) as u32;
        if j > 0 {
            // Tile `j` has landed, for every thread; and every warp is done with tile `j - 1`,
            // whose buffer the copies below overwrite. (Tile 0 landed before the loop.)
            cp_async_wait(0);
            sync_threads();
        }
        // Tile `j + 1` is copied while tile `j`'s scores, softmax and `P V` run: one barrier a
        // tile.
        if j + 1 < tiles {
            let n1 = n0 + 64;
            let k_next = k_at + n1 * k_rs;
            let nb = (4096 - kb) as usize;
            for i in 0..8 {
                if (i as u32) < passes && c_on {
                    let r = n1 + (cr + (i as u32) * rstep) as usize;
                    let dst = nb + (c_dst + (i as u32) * rstep * 64) as usize;
                    let len = if r < n_end { 8 } else { 0 };
                    cp_async(&mut sk, dst, k, k_next + (i as usize) * k_pass, len);
                    cp_async(&mut sv, dst, v, k_next + (i as usize) * k_pass, len);
                }
            }
        }
        cp_async_commit();

        // S = Q K^T, 16 x 64 per row tile, whole (a partial tile's missing keys are zeros,
        // masked below): a branch per `mma` would split the unrolled steps the compiler
        // schedules together.
        for x in 0..64 {
            s[x] = 0.0;
        }
        for ks in 0..8 {
            if ks * 16 < d {
                let ch = (2 * (ks as u32) + quad % 2) ^ r8;
                for np in 0..4 {
                    let word = kb + k_row + (np as u32) * 1024 + ch * 4;
                    ldmatrix_x4(&mut kf, np * 4, &sk, word as usize);
                }
                for mi in 0..2 {
                    let mut qa = (mi * 4 + ks) * 4;
                    if !q_in_regs {
                        qa = mi * 16;
                        let ch = (2 * (ks as u32) + quad / 2) ^ r8;
                        let word = q_row + (mi as u32) * 4096 + ch * 4;
                        ldmatrix_x4(&mut qf, qa, &sq, word as usize);
                    }
                    for nt in 0..8 {
                        mma_m16n8k16(&mut s, mi * 32 + nt * 4, &qf, qa, &kf, nt * 2);
                    }
                }
            }
        }

        // Masks, only on tiles that cross the valid length or the diagonal (the first row of
        // the block has the lowest causal limit).
        if n0 + 64 > kl || (is_causal && n0 + 63 + t_q > m0 + t_k) {
            for mi in 0..2 {
                for nt in 0..8 {
                    for i in 0..4 {
                        let col = n0 + nt * 8 + (t4 * 2) as usize + i % 2;
                        let row = row0 + mi * 64 + (i / 2) * 8;
                        if col >= kl || (is_causal && col + t_q > row + t_k) {
                            s[mi * 32 + nt * 4 + i] = T::NEG_INFINITY;
                        }
                    }
                }
            }
        }

        // Online softmax, row by row: the new maximum over the quad, the rescale of what was
        // summed under the old one, and the probabilities in place of the scores.
        for mi in 0..2 {
            for h in 0..2 {
                let r = mi * 2 + h;
                let at = mi * 32 + h * 2;
                let mut mx = row_max[r];
                for nt in 0..8 {
                    mx = mx.max(s[at + nt * 4]).max(s[at + nt * 4 + 1]);
                }
                mx = mx.max(warp_shuffle_xor(mx, 1));
                mx = mx.max(warp_shuffle_xor(mx, 2));
                // A row with no valid key yet keeps the maximum -inf: subtract 0 instead,
                // so each exp is of -inf (0), never of -inf + inf (NaN).
                let base = if mx == T::NEG_INFINITY {
                    0.0
                } else {
                    mx * scale2
                };
                alpha[r] = (row_max[r] * scale2 - base).exp2();
                row_max[r] = mx;
                let mut sum = 0.0;
                // ANCHOR: exp2
                for nt in 0..8 {
                    for e in 0..2 {
                        let p = (s[at + nt * 4 + e] * scale2 - base).exp2();
                        s[at + nt * 4 + e] = p;
                        sum += p;
                    }
                }
                // ANCHOR_END: exp2
                row_sum[r] = row_sum[r] * alpha[r] + sum;
            }
        }

        // O = alpha O + P V. Key step `kk`'s A fragment is score tiles 2 kk and 2 kk + 1
        // rounded to T: registers 0 and 1 hold rows g and g + 8 of keys 2 t4.., registers 2
        // and 3 the same 8 keys on. Keys past `n_end` have P = 0 and zero-filled V rows, so
        // the last tile needs no branch. One branch per 16 columns of d covers the rescale and
        // the four key steps; each V fragment feeds every row tile.
        for mi in 0..2 {
            for kk in 0..4 {
                let p = mi * 16 + kk * 4;
                let x = mi * 32 + kk * 8;
                pf[p] = pack2(s[x], s[x + 1]);
                pf[p + 1] = pack2(s[x + 2], s[x + 3]);
                pf[p + 2] = pack2(s[x + 4], s[x + 5]);
                pf[p + 3] = pack2(s[x + 6], s[x + 7]);
            }
        }
        for dp in 0..8 {
            if dp * 16 < d {
                for mi in 0..2 {
                    for x in 0..8 {
                        acc[mi * 64 + dp * 8 + x] *= alpha[mi * 2 + (x / 2) % 2];
                    }
                }
                let ch = (2 * (dp as u32) + quad / 2) ^ r8;
                for kk in 0..4 {
                    let word = kb + v_row + (kk as u32) * 1024 + ch * 4;
                    ldmatrix_x4_trans(&mut vf, 0, &sv, word as usize);
                    for mi in 0..2 {
                        let at = mi * 64 + dp * 8;
                        let p = mi * 16 + kk * 4;
                        mma_m16n8k16(&mut acc, at, &pf, p, &vf, 0);
                        mma_m16n8k16(&mut acc, at + 4, &pf, p, &vf, 2);
                    }
                }
            }
        }
        j += 1;
    }

    // The quad's sums, then the output divided by them, rounded to T once.
    let o0 = n * os.stride(0) + hh * os.stride(1);
    let o_rs = os.stride(2);
    for mi in 0..2 {
        for h in 0..2 {
            let r = mi * 2 + h;
            let mut l = row_sum[r];
            l += warp_shuffle_xor(l, 1);
            l += warp_shuffle_xor(l, 2);
            let row = row0 + mi * 64 + h * 8;
            // Every row with a valid key sums at least exp(0) = 1; a row without one sums 0.
            let inv = if l > 0.0 { 1.0 / l } else { 0.0 };
            if row < t_q {
                let o_row = o0 + row * o_rs + (t4 * 2) as usize;
                for dt in 0..16 {
                    if dt * 8 < d {
                        o[o_row + dt * 8] = acc[mi * 64 + dt * 4 + h * 2] * inv;
                        o[o_row + dt * 8 + 1] = acc[mi * 64 + dt * 4 + h * 2 + 1] * inv;
                    }
                }
                if t4 == 0 {
                    lse[b * t_q + row] = if l > 0.0 {
                        row_max[r] * scale + l.ln()
                    } else {
                        T::NEG_INFINITY
                    };
                }
            }
        }
    }
}
