//! Fused attention backward on the tensor cores, written with `#[kernel]` in the manner of
//! FlashAttention-2: the gradients of `o = softmax(scale q k^T) v` with respect to `q`, `k` and
//! `v`, recomputing the probabilities from the log-sum-exp the forward saved
//! ([`flash_attn_fwd()`](super::flash_attn_fwd())), so the `t_q x t_k` matrices never reach
//! memory. Three kernels, launched in this order on one stream:
//!
//! 1. [`flash_attn_bwd_rowdot()`]: `D_i = sum_c do_ic o_ic` (f32), four query rows a warp;
//! 2. [`flash_attn_bwd_dkdv()`]: `dv = P^T do` and `dk = scale dS^T q`, one block per 64 keys,
//!    looping over the queries;
//! 3. [`flash_attn_bwd_dq()`]: `dq = scale dS k`, one block per 64 or 128 queries
//!    ([`flash_attn_bwd_dq_rows`]), looping over the keys;
//!
//! with `P_ij = exp(scale q_i . k_j - lse_i)`, `dP = do v^T` and `dS = P * (dP - D)`
//! (elementwise). The last two read `D` and are independent of each other. Each output element
//! is written by one thread, once, with no atomics: the results are the same from run to run.
//!
//! Conventions are the forward's: `q`, `o`, `do` are `[batch, heads, t_q, d]`, `k`, `v`
//! `[batch, heads, t_k, d]`, f16 or bf16, each read (and `dq`, `dk`, `dv` written) through the
//! strides of its group, `qs` (`q`, `dq`), `ks` (`k`, `v`, `dk`, `dv`) or `os` (`o`, `do`), as
//! [`flash_attn_fwd()`](super::flash_attn_fwd()) describes; `lse` and `delta` are dense
//! `[batch heads, t_q]` f32s (`lse` a natural log); the causal mask lets query `i` see keys
//! `j <= i + t_k - t_q`; `key_len[b]` masks keys `j >= key_len[b]` of row `b = n heads + h`.
//! The gradients' rows must not overlap each other or the inputs'.
//!
//! Invariant: every size works and a masked probability is exactly 0. Rows past `t_q` or `t_k`
//! are zero-filled in shared memory and not stored; masked keys get `P = 0` by a select, not
//! through the exponential; a query row with no valid key (its `lse` is -inf) is given an `lse`
//! of +inf, so every `exp` of it is 0 and no NaN arises. Every key and query row is stored,
//! zeros included, so the outputs need no clearing.

use crate::Float;
use crate::kernel::LaunchConfig;
use rtx_macros::kernel;

/// Threads per block of [`flash_attn_bwd_dkdv()`] and [`flash_attn_bwd_dq()`]: 4 warps, each
/// owning 16 keys (dk, dv) or 16 queries (dq).
pub const FLASH_ATTN_BWD_THREADS: u32 = 128;
/// Keys per block of [`flash_attn_bwd_dkdv()`]: its grid's x extent is `ceil(t_k / 64)`.
pub const FLASH_ATTN_BWD_BLOCK_K: usize = 64;
/// Queries per block of [`flash_attn_bwd_dq()`] at head dim `d` for rows of `t_k` keys: 128 up
/// to a d of 64 past 256 keys (two row tiles of 16 a warp, so each K and V fragment read feeds
/// two products), else 64 (one: past a d of 64 the accumulators leave no registers for two,
/// and at 256 keys or fewer a block has so few key tiles that twice the blocks, each lighter
/// in registers, keep more warps busy).
pub fn flash_attn_bwd_dq_rows(d: usize, t_k: usize) -> usize {
    if d <= 64 && t_k > 256 { 128 } else { 64 }
}
/// Query rows per block of [`flash_attn_bwd_rowdot()`]: [`FLASH_ATTN_BWD_ROWDOT_WARP_ROWS`] a
/// warp of its [`FLASH_ATTN_BWD_THREADS`] threads.
pub const FLASH_ATTN_BWD_ROWDOT_ROWS: usize = 16;
/// Query rows each warp of [`flash_attn_bwd_rowdot()`] takes, their loads in flight together.
pub const FLASH_ATTN_BWD_ROWDOT_WARP_ROWS: usize = 4;
/// The largest head dim the backward kernels take; `d` is a multiple of 8 up to it.
pub const FLASH_ATTN_BWD_MAX_D: usize = 128;

/// The launch of [`flash_attn_bwd_rowdot()`] over `batch x heads` rows of `t_q` queries: a
/// grid of `ceil(t_q / 16) x heads x batch` blocks of [`FLASH_ATTN_BWD_THREADS`] threads.
pub fn flash_attn_bwd_rowdot_launch(batch: usize, heads: usize, t_q: usize) -> LaunchConfig {
    LaunchConfig::new(
        (
            t_q.div_ceil(FLASH_ATTN_BWD_ROWDOT_ROWS) as u32,
            heads as u32,
            batch as u32,
        ),
        FLASH_ATTN_BWD_THREADS,
    )
}

/// The launch of [`flash_attn_bwd_dkdv()`] over `batch x heads` rows of `t_k` keys: a grid of
/// `ceil(t_k / 64) x heads x batch` blocks of [`FLASH_ATTN_BWD_THREADS`] threads.
pub fn flash_attn_bwd_dkdv_launch(batch: usize, heads: usize, t_k: usize) -> LaunchConfig {
    LaunchConfig::new(
        (
            t_k.div_ceil(FLASH_ATTN_BWD_BLOCK_K) as u32,
            heads as u32,
            batch as u32,
        ),
        FLASH_ATTN_BWD_THREADS,
    )
}

/// The launch of [`flash_attn_bwd_dq()`] over `batch x heads` rows of `t_q` queries in blocks
/// of `rows` queries (as [`flash_attn_bwd_dq_rows`] chooses): a grid of `ceil(t_q / rows) x
/// heads x batch` blocks of [`FLASH_ATTN_BWD_THREADS`] threads.
pub fn flash_attn_bwd_dq_launch(
    batch: usize,
    heads: usize,
    t_q: usize,
    rows: usize,
) -> LaunchConfig {
    LaunchConfig::new(
        (t_q.div_ceil(rows) as u32, heads as u32, batch as u32),
        FLASH_ATTN_BWD_THREADS,
    )
}

/// First step of the attention backward: `delta[b][i] = sum_c do[b][i][c] o[b][i][c]` in f32
/// for each of the `t_q` rows of the `batch x heads` rows `b` of `d` values of `o` and its
/// gradient `dout` (both read through the o group's strides `os`; `delta` is dense
/// `[batch heads, t_q]`), which is the `D_i = sum_j P_ij dP_ij` of the softmax backward. Launch
/// it with [`flash_attn_bwd_rowdot_launch`] (4 rows a warp; any multiple of 32 threads per
/// block works, warp `w` of block `x` taking query rows from `4 (x * warps + w)`).
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernels::{flash_attn_bwd_rowdot, flash_attn_bwd_rowdot_launch};
/// use rtx_kernels::kernels::flash_attn_dense_strides;
/// let o: Vec<bf16> = (0..6).map(|i| bf16::from_f32(i as f32)).collect();
/// let dout = vec![bf16::from_f32(2.0); 6];
/// let mut delta = vec![0.0f32; 2];
/// let (launch, s) = (flash_attn_bwd_rowdot_launch(1, 1, 2), flash_attn_dense_strides(1, 2, 3));
/// flash_attn_bwd_rowdot(launch, &o, &dout, &mut delta, s, 1, 1, 2, 3).unwrap();
/// assert_eq!(delta, vec![6.0, 24.0]);
/// ```
#[kernel(crate = crate, specialize(d = 64, 128))]
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_bwd_rowdot<T: Float>(
    o: &[T],
    dout: &[T],
    delta: &mut [T::Acc],
    os: KernelStrides,
    batch: usize,
    heads: usize,
    t_q: usize,
    d: usize,
) {
    let lane = lane_id();
    let i0 = 4 * (block_idx_x() * (block_dim_x() / 32) + thread_idx_x() / 32);
    let hh = block_idx_y();
    let n = block_idx_z();
    // The whole warp leaves together, and no other warp waits for it.
    if n >= batch || hh >= heads || i0 >= t_q {
        return;
    }
    let head = n * os.stride(0) + hh * os.stride(1);
    // Neighbouring lanes read neighbouring elements, so each load of the warp is coalesced; with
    // d a constant (the entries for 64 and 128) the loops unroll, and a lane's loads for its
    // four rows are in flight at once: a row's sum waits on memory once, not once a row.
    let mut acc = [0.0; 4];
    for r in 0..4 {
        if i0 + r < t_q {
            let at = head + (i0 + r) * os.stride(2);
            let mut c = lane;
            while c < d {
                acc[r] += o[at + c] * dout[at + c];
                c += 32;
            }
        }
    }
    for r in 0..4 {
        let mut a = acc[r];
        a += warp_shuffle_xor(a, 16);
        a += warp_shuffle_xor(a, 8);
        a += warp_shuffle_xor(a, 4);
        a += warp_shuffle_xor(a, 2);
        a += warp_shuffle_xor(a, 1);
        if lane == 0 && i0 + r < t_q {
            delta[(n * heads + hh) * t_q + i0 + r] = a;
        }
    }
}

/// Attention backward for the keys, f16 or bf16, on the tensor cores: `dv = P^T do` and
/// `dk = scale dS^T q` (`[batch, heads, t_k, d]` each, written through `ks` as `k` and `v` are
/// read), from `q` (through `qs`), `dout` (`[batch, heads, t_q, d]`, through `os`), `k`, `v`
/// (`[batch, heads, t_k, d]`), the forward's `lse` and the `delta` of
/// [`flash_attn_bwd_rowdot()`] (`[batch heads, t_q]`, f32 each), where
/// `P_ij = exp(scale q_i . k_j - lse_i)` and `dS_ij = P_ij (do_i . v_j - delta_i)`.
/// Accumulation is in f32, rounded once to `T` on store.
///
/// `causal`, `padded`, `key_len` and `scale` are as in
/// [`flash_attn_fwd()`](super::flash_attn_fwd()): with `causal` non-zero query `i` sees keys
/// `j <= i + t_k - t_q`; with `padded` non-zero `key_len` holds `batch heads` valid key counts
/// (keys `j >= key_len[b]` get zero gradients), otherwise it is not read (pass `&[]` natively);
/// `d` is a multiple of 8 up to [`FLASH_ATTN_BWD_MAX_D`] (64 and 128 are the sizes it is built
/// for: the math runs on halves of 64 columns, zero past d); `scale` is positive, used in f32. A
/// query row with no valid key (`lse` -inf) contributes nothing. Launch it with
/// [`flash_attn_bwd_dkdv_launch`]; buffers start on 16-byte boundaries and the strides are
/// multiples of 8 elements.
///
/// Each block of 4 warps takes 64 keys of one head, their K and V tiles staying in shared
/// memory; each warp owns 16 of them and holds their dk and dv in f32 accumulators (64 values
/// each per lane at d = 128). It loops over tiles of Q and dO (64 queries up to a d of 64, 32
/// past it, where the accumulators leave no registers for more scores), from the first tile
/// that sees its first key under the causal mask, and per tile computes, with
/// `mma_m16n8k16`: `dP^T = V dO^T`, `S^T = K Q^T` (K and V rows are A fragments, Q and dO rows
/// read by `ldmatrix` the B fragments of their transposes), `P^T`, `dV += P^T dO`,
/// `dS^T = P^T * (dP^T - D)` and `dK += dS^T Q` (Q and dO read transposed by `ldmatrix` are the
/// B fragments; `P^T` and `dS^T` rounded to `T` are the A fragments, as the accumulator layout is
/// the A fragment's). The copy of each Q tile overlaps `dP^T`, that of the next dO tile
/// overlaps `dK`. Shared memory is 64 KiB (K, V: 64 rows of 128 elements; Q, dO: 64 rows),
/// dynamic, and the tiles are single-buffered; chunks are swizzled (16-byte chunk
/// `c` of row `r` stored at `c ^ (r % 8)`) so the 8 rows an `ldmatrix` reads lie in different
/// banks.
///
/// ```
/// use half::bf16;
/// use rtx_kernels::kernels::{flash_attn_bwd_dkdv, flash_attn_bwd_dkdv_launch};
/// use rtx_kernels::kernels::flash_attn_dense_strides;
/// // One query and one key (q = 0, so the score and lse are 0): P = 1 and o = v, so dv = do
/// // and dS = do . v - do . o = 0.
/// let d = 16;
/// let q = vec![bf16::ZERO; d];
/// let x: Vec<bf16> = (0..d).map(|i| bf16::from_f32(i as f32 / 16.0)).collect();
/// let dout = vec![bf16::from_f32(0.5); d];
/// let delta = [x.iter().map(|v| v.to_f32() * 0.5).sum::<f32>()];
/// let (mut dk, mut dv) = (vec![bf16::ZERO; d], vec![bf16::ZERO; d]);
/// let (launch, s) = (flash_attn_bwd_dkdv_launch(1, 1, 1), flash_attn_dense_strides(1, 1, d));
/// flash_attn_bwd_dkdv(
///     launch, &q, &x, &x, &dout, &[0.0], &delta, &mut dk, &mut dv, &[], s, s, s, 1, 1, 1, 1, d,
///     0.25, 0, 0,
/// )
/// .unwrap();
/// assert!(dv.iter().all(|g| g.to_f32() == 0.5));
/// assert!(dk.iter().all(|g| g.to_f32() == 0.0));
/// ```
#[kernel(crate = crate, specialize(d = 64, 128))]
pub fn flash_attn_bwd_dkdv<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[T::Acc],
    delta: &[T::Acc],
    dk: &mut [T],
    dv: &mut [T],
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
    // K and V: 64 rows of 64 words (128 elements, the largest d), so a row's 16-byte chunks can
    // be swizzled within it whatever d is; Q and dO: a query tile each, up to 64 rows. 64 KiB
    // in all (dynamic: `#[kernel]` sees to it).
    #[shared]
    let sk: [u32; 4096];
    #[shared]
    let sv: [u32; 4096];
    #[shared]
    let sq: [u32; 4096];
    #[shared]
    let sdo: [u32; 4096];
    // Index arithmetic within the block is 32-bit (one instruction a step where `usize`
    // takes two); only offsets into the buffers are `usize`.
    let tid = thread_idx_x() as u32;
    let lane = tid % 32;
    let warp = tid / 32;
    let hh = block_idx_y();
    let n = block_idx_z();
    let n0 = block_idx_x() * 64;
    // The whole block leaves together, before any barrier.
    if n >= batch || hh >= heads || n0 >= t_k {
        return;
    }
    // The row's index among the `batch heads` (for `lse`, `delta` and `key_len`), and where its
    // head starts in each group's buffers.
    let b = n * heads + hh;
    let q0 = n * qs.stride(0) + hh * qs.stride(1);
    let q_rs = qs.stride(2);
    let k0 = n * ks.stride(0) + hh * ks.stride(1);
    let k_rs = ks.stride(2);
    let o0 = n * os.stride(0) + hh * os.stride(1);
    let o_rs = os.stride(2);
    let scale = scale as T;
    // Probabilities are exp2(s scale log2(e) - lse log2(e)): one multiply-add and one hardware
    // exp2 each.
    let scale2 = scale * 1.4426950408889634;
    let is_causal = causal != 0;
    // Queries per tile: 64 up to a d of 64 (the accumulators of a d of 128 leave no registers
    // for twice the scores), so each K and V fragment read and each barrier serve twice the
    // products; 32 past it.
    let qt: usize = if d <= 64 { 64 } else { 32 };
    let mut kl = t_k;
    if padded != 0 {
        kl = kl.min(key_len[b] as usize);
    }
    // Query tiles that see a key of this block: under the causal mask, query `i` sees key `n0`
    // from `i = n0 + t_q - t_k` on, so earlier tiles are skipped; a block wholly past the valid
    // length has none, and stores zeros.
    let mut j0: usize = 0;
    if is_causal && n0 + t_q > t_k {
        j0 = (n0 + t_q - t_k) / qt;
    }
    let mut j_end = (t_q + qt - 1) / qt;
    if n0 >= kl {
        j_end = 0;
    }

    // Tile copies: this thread copies 16-byte chunk `cc` of rows `cr + 8 i`, whose swizzled
    // place is chunk `cc ^ cr` of the row (the row mod 8 is `cr`). The math runs on whole
    // halves of 64 columns (one branch each, so the compiler schedules each half's loads and
    // `mma`s together): chunks past d in a half that is read are zero-filled, those of a half
    // that is not (d <= 64) are left alone.
    let cc = tid % 16;
    let cr = tid / 16;
    let c_on = (((cc / 8) * 64) as usize) < d;
    let c_in = ((cc * 8) as usize) < d;
    let c_dst = cr * 64 + (cc ^ cr) * 4;
    // K, V and the first dO tile, one group; keys past the valid length are zero-filled.
    if j0 < j_end && c_on {
        for i in 0..8 {
            let r = (cr + 8 * (i as u32)) as usize;
            let len = if c_in && n0 + r < kl { 8 } else { 0 };
            let at = k0 + (n0 + r) * k_rs + (cc * 8) as usize;
            cp_async(&mut sk, (c_dst + (i as u32) * 512) as usize, k, at, len);
            cp_async(&mut sv, (c_dst + (i as u32) * 512) as usize, v, at, len);
        }
        for i in 0..8 {
            if i * 8 < qt {
                let r = (cr + 8 * (i as u32)) as usize;
                let m = j0 * qt + r;
                let len = if c_in && m < t_q { 8 } else { 0 };
                let at = o0 + m * o_rs + (cc * 8) as usize;
                cp_async(&mut sdo, (c_dst + (i as u32) * 512) as usize, dout, at, len);
            }
        }
    }
    cp_async_commit();

    // `ldmatrix` addressing: this lane gives row `r8` of matrix `quad`; every row it names is
    // r8 mod 8, so its chunks are swizzled by `r8`.
    let quad = lane / 8;
    let r8 = lane % 8;
    // K and V rows, A fragments (16 keys x 16 along d): row `(quad % 2) * 8 + r8` of the
    // warp's 16, chunk `2 ks + quad / 2`.
    let a_row = (warp * 16 + (quad % 2) * 8 + r8) * 64;
    // Q and dO rows as B fragments of their transposes (16 along d x 8 queries), two 8-query
    // tiles per `ldmatrix_x4`: query row `np * 16 + (quad / 2) * 8 + r8`, chunk `2 ks + quad % 2`.
    let b_row = ((quad / 2) * 8 + r8) * 64;
    // Q and dO read transposed, B fragments (16 queries x 8 along d), two d tiles per
    // `ldmatrix_x4_trans`: query row `kk * 16 + (quad % 2) * 8 + r8`, chunk `2 dp + quad / 2`.
    let t_row = ((quad % 2) * 8 + r8) * 64;

    // Accumulator element `i` of a tile is row `g + 8 (i / 2)`, column `2 t4 + i % 2`: this
    // lane holds keys `key0` and `key0 + 8` of S^T and dP^T, and of dk and dv.
    let g = lane / 4;
    let t4 = lane % 4;
    let key0 = n0 + (warp * 16 + g) as usize;
    let mut dka = [0.0; 64];
    let mut dva = [0.0; 64];
    let mut st = [0.0; 32];
    let mut dpt = [0.0; 32];
    let mut af = [0u32; 4];
    let mut bf = [0u32; 16];
    let mut tf = [0u32; 4];
    let mut pf = [0u32; 16];
    // lse and D of this lane's query columns of the tile (column `nt * 8 + 2 t4 + e` at
    // `nt * 2 + e`).
    let mut lq = [0.0; 16];
    let mut dl = [0.0; 16];

    let mut j = j0;
    while j < j_end {
        let m0 = j * qt;
        // The first Q tile is copied at once (no warp has read Q yet), so it is on its way
        // while the block waits for K, V and the first dO tile; each later one once every warp
        // is done with the last.
        let first = j == j0;
        // Unless first: dO tile `j` has landed for every thread, and every warp is done with
        // the last Q tile, which the copies below overwrite.
        if !first {
            cp_async_wait(0);
            sync_threads();
        }
        if c_on {
            for i in 0..8 {
                if i * 8 < qt {
                    let r = (cr + 8 * (i as u32)) as usize;
                    let len = if c_in && m0 + r < t_q { 8 } else { 0 };
                    let at = q0 + (m0 + r) * q_rs + (cc * 8) as usize;
                    cp_async(&mut sq, (c_dst + (i as u32) * 512) as usize, q, at, len);
                }
            }
        }
        cp_async_commit();
        // K, V and dO tile `j0` have landed for every thread; Q's tile may still be in flight.
        if first {
            cp_async_wait(1);
            sync_threads();
        }

        // Read early, so their latency hides behind dP^T. A row without a key (lse -inf) or
        // past t_q gets +inf: each exp below is then exp(-inf) = 0, never exp(+inf).
        for nt in 0..8 {
            if nt * 8 < qt {
                for e in 0..2 {
                    let m = m0 + nt * 8 + (t4 * 2) as usize + e;
                    let mut l = T::INFINITY;
                    let mut dd = 0.0;
                    if m < t_q {
                        l = lse[b * t_q + m];
                        dd = delta[b * t_q + m];
                    }
                    if l == T::NEG_INFINITY {
                        l = T::INFINITY;
                    }
                    lq[nt * 2 + e] = l * 1.4426950408889634;
                    dl[nt * 2 + e] = dd;
                }
            }
        }

        // dP^T = V dO^T, 16 keys x `qt` queries for this warp, while Q's tile is in flight.
        for x in 0..32 {
            dpt[x] = 0.0;
        }
        for h in 0..2 {
            if h * 64 < d {
                for k4 in 0..4 {
                    let ks = h * 4 + k4;
                    let ch = (2 * (ks as u32) + quad / 2) ^ r8;
                    ldmatrix_x4(&mut af, 0, &sv, (a_row + ch * 4) as usize);
                    for np in 0..4 {
                        if np * 16 < qt {
                            let ch = (2 * (ks as u32) + quad % 2) ^ r8;
                            ldmatrix_x4(
                                &mut bf,
                                np * 4,
                                &sdo,
                                (b_row + (np as u32) * 1024 + ch * 4) as usize,
                            );
                        }
                    }
                    for nt in 0..8 {
                        if nt * 8 < qt {
                            mma_m16n8k16(&mut dpt, nt * 4, &af, 0, &bf, nt * 2);
                        }
                    }
                }
            }
        }

        // Q tile `j` has landed for every thread.
        cp_async_wait(0);
        sync_threads();

        // S^T = K Q^T.
        for x in 0..32 {
            st[x] = 0.0;
        }
        for h in 0..2 {
            if h * 64 < d {
                for k4 in 0..4 {
                    let ks = h * 4 + k4;
                    let ch = (2 * (ks as u32) + quad / 2) ^ r8;
                    ldmatrix_x4(&mut af, 0, &sk, (a_row + ch * 4) as usize);
                    for np in 0..4 {
                        if np * 16 < qt {
                            let ch = (2 * (ks as u32) + quad % 2) ^ r8;
                            ldmatrix_x4(
                                &mut bf,
                                np * 4,
                                &sq,
                                (b_row + (np as u32) * 1024 + ch * 4) as usize,
                            );
                        }
                    }
                    for nt in 0..8 {
                        if nt * 8 < qt {
                            mma_m16n8k16(&mut st, nt * 4, &af, 0, &bf, nt * 2);
                        }
                    }
                }
            }
        }

        // P^T, with the masks only on tiles that cross the valid length or the diagonal (the
        // block's last key against the tile's first query has the tightest causal limit).
        let masked = n0 + 64 > kl || (is_causal && n0 + 63 + t_q > m0 + t_k);
        for nt in 0..8 {
            if nt * 8 < qt {
                for i in 0..4 {
                    let mut p = (st[nt * 4 + i] * scale2 - lq[nt * 2 + i % 2]).exp2();
                    if masked {
                        let key = key0 + (i / 2) * 8;
                        let m = m0 + nt * 8 + (t4 * 2) as usize + i % 2;
                        if key >= kl || (is_causal && key + t_q > m + t_k) {
                            p = 0.0;
                        }
                    }
                    st[nt * 4 + i] = p;
                }
            }
        }
        // P^T rounded to T as A fragments: query step `kk` is tiles 2 kk and 2 kk + 1;
        // registers 0 and 1 hold keys g and g + 8 of queries 2 t4.., registers 2 and 3 the
        // same 8 queries on.
        for kk in 0..4 {
            if kk * 16 < qt {
                pf[kk * 4] = pack2(st[kk * 8], st[kk * 8 + 1]);
                pf[kk * 4 + 1] = pack2(st[kk * 8 + 2], st[kk * 8 + 3]);
                pf[kk * 4 + 2] = pack2(st[kk * 8 + 4], st[kk * 8 + 5]);
                pf[kk * 4 + 3] = pack2(st[kk * 8 + 6], st[kk * 8 + 7]);
            }
        }
        // dV += P^T dO.
        for h in 0..2 {
            if h * 64 < d {
                for kk in 0..4 {
                    if kk * 16 < qt {
                        for d4 in 0..4 {
                            let dp = h * 4 + d4;
                            let ch = (2 * (dp as u32) + quad / 2) ^ r8;
                            ldmatrix_x4_trans(
                                &mut tf,
                                0,
                                &sdo,
                                (t_row + (kk as u32) * 1024 + ch * 4) as usize,
                            );
                            mma_m16n8k16(&mut dva, dp * 8, &pf, kk * 4, &tf, 0);
                            mma_m16n8k16(&mut dva, dp * 8 + 4, &pf, kk * 4, &tf, 2);
                        }
                    }
                }
            }
        }

        // Every warp is done with dO tile `j`: the next one is copied while dK is computed.
        sync_threads();
        if j + 1 < j_end && c_on {
            for i in 0..8 {
                if i * 8 < qt {
                    let r = (cr + 8 * (i as u32)) as usize;
                    let m = m0 + qt + r;
                    let len = if c_in && m < t_q { 8 } else { 0 };
                    let at = o0 + m * o_rs + (cc * 8) as usize;
                    cp_async(&mut sdo, (c_dst + (i as u32) * 512) as usize, dout, at, len);
                }
            }
        }
        cp_async_commit();

        // dS^T = P^T * (dP^T - D), from the f32 P^T, then rounded to T as A fragments.
        for nt in 0..8 {
            if nt * 8 < qt {
                for i in 0..4 {
                    st[nt * 4 + i] = st[nt * 4 + i] * (dpt[nt * 4 + i] - dl[nt * 2 + i % 2]);
                }
            }
        }
        for kk in 0..4 {
            if kk * 16 < qt {
                pf[kk * 4] = pack2(st[kk * 8], st[kk * 8 + 1]);
                pf[kk * 4 + 1] = pack2(st[kk * 8 + 2], st[kk * 8 + 3]);
                pf[kk * 4 + 2] = pack2(st[kk * 8 + 4], st[kk * 8 + 5]);
                pf[kk * 4 + 3] = pack2(st[kk * 8 + 6], st[kk * 8 + 7]);
            }
        }
        // dK += dS^T Q (the scale is applied once, on store).
        for h in 0..2 {
            if h * 64 < d {
                for kk in 0..4 {
                    if kk * 16 < qt {
                        for d4 in 0..4 {
                            let dp = h * 4 + d4;
                            let ch = (2 * (dp as u32) + quad / 2) ^ r8;
                            ldmatrix_x4_trans(
                                &mut tf,
                                0,
                                &sq,
                                (t_row + (kk as u32) * 1024 + ch * 4) as usize,
                            );
                            mma_m16n8k16(&mut dka, dp * 8, &pf, kk * 4, &tf, 0);
                            mma_m16n8k16(&mut dka, dp * 8 + 4, &pf, kk * 4, &tf, 2);
                        }
                    }
                }
            }
        }
        j += 1;
    }

    // Every key row of the block is stored, zeros for those no query sees.
    for h in 0..2 {
        let key = key0 + h * 8;
        if key < t_k {
            for dt in 0..16 {
                if dt * 8 < d {
                    let at = k0 + key * k_rs + dt * 8 + (t4 * 2) as usize;
                    dk[at] = dka[dt * 4 + h * 2] * scale;
                    dk[at + 1] = dka[dt * 4 + h * 2 + 1] * scale;
                    dv[at] = dva[dt * 4 + h * 2];
                    dv[at + 1] = dva[dt * 4 + h * 2 + 1];
                }
            }
        }
    }
}

/// Attention backward for the queries, f16 or bf16, on the tensor cores:
/// `dq = scale dS k` (`[batch, heads, t_q, d]`, written through `qs` as `q` is read), with the
/// inputs and conventions of [`flash_attn_bwd_dkdv()`]. A query row with no valid key gets
/// zeros. Launch it with
/// [`flash_attn_bwd_dq_launch`]; buffers start on 16-byte boundaries and the strides are
/// multiples of 8 elements.
///
/// Each block of 4 warps takes `rows` queries of one head, 64 or (up to a d of 64) 128, as
/// [`flash_attn_bwd_dq_rows`] chooses: with 128 each warp owns two row tiles of 16 (rows `16 w`
/// and `64 + 16 w`), so each K and V fragment read from shared memory feeds two products; with
/// 64, one. A launch of 128 rows past a d of 64 stores nothing. A warp holds its rows of
/// Q and dO as A fragments in registers and its dq in f32 accumulators. Q and dO pass through
/// the shared K and V buffers once (with 64 rows through their second halves, beside the first
/// K and V tile, copied with them); then 32-key tiles of K and V stream through two stages of
/// them (`cp_async` fills one while the warps compute on the other, one barrier per tile), up
/// to the causal limit of the block's last query and the valid length. Per tile, with
/// `mma_m16n8k16`: `S = Q K^T`, `dP = dO V^T` (K and V rows read by `ldmatrix` are the B
/// fragments of their transposes), `dS = P * (dP - D)` in f32, rounded to `T` as A fragments,
/// and `dQ += dS K` (K read transposed). Shared memory: 64 KiB (dynamic), swizzled as in
/// [`flash_attn_bwd_dkdv()`].
#[kernel(crate = crate, specialize(d = 64, 128), specialize(rows = 64, 128))]
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_bwd_dq<T: Float>(
    q: &[T],
    k: &[T],
    v: &[T],
    dout: &[T],
    lse: &[T::Acc],
    delta: &[T::Acc],
    dq: &mut [T],
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
    rows: usize,
) {
    // Two stages of 32 rows of 64 words (128 elements) each for K and for V, in the first half
    // of each array; before the loop, the block's up to 128 rows of Q pass through `sk` and
    // those of dO through `sv` (64 rows through the second halves). 64 KiB in all (dynamic: `#[kernel]` sees to it).
    #[shared]
    let sk: [u32; 8192];
    #[shared]
    let sv: [u32; 8192];
    // Index arithmetic within the block is 32-bit (one instruction a step where `usize`
    // takes two); only offsets into the buffers are `usize`.
    let tid = thread_idx_x() as u32;
    let lane = tid % 32;
    let warp = tid / 32;
    let hh = block_idx_y();
    let n = block_idx_z();
    // Row tiles of 16 a warp: two with 128 rows (rows `16 w` and `64 + 16 w` of the block),
    // one with 64.
    let rt: usize = rows / 64;
    let bq = 64 * rt;
    let m0 = block_idx_x() * bq;
    // The whole block leaves together, before any barrier; two row tiles' fragments fit only up
    // to a d of 64.
    if n >= batch || hh >= heads || m0 >= t_q || (rt > 1 && d > 64) {
        return;
    }
    // The row's index among the `batch heads` (for `lse`, `delta` and `key_len`), and where its
    // head starts in each group's buffers.
    let b = n * heads + hh;
    let q0 = n * qs.stride(0) + hh * qs.stride(1);
    let q_rs = qs.stride(2);
    let k0 = n * ks.stride(0) + hh * ks.stride(1);
    let k_rs = ks.stride(2);
    let o0 = n * os.stride(0) + hh * os.stride(1);
    let o_rs = os.stride(2);
    let scale = scale as T;
    // Probabilities are exp2(s scale log2(e) - lse log2(e)): one multiply-add and one hardware
    // exp2 each.
    let scale2 = scale * 1.4426950408889634;
    let is_causal = causal != 0;
    // Keys this block reads: the valid ones, up to the causal limit of its last row (row `i`
    // sees keys `j` with `j + t_q <= i + t_k`). A block left with none stores zeros.
    let mut kl = t_k;
    if padded != 0 {
        kl = kl.min(key_len[b] as usize);
    }
    let mut n_end = kl;
    if is_causal {
        let lim = (m0 + bq).min(t_q) + t_k;
        n_end = if lim > t_q { n_end.min(lim - t_q) } else { 0 };
    }
    let tiles = (n_end + 31) / 32;

    // Tile copies: this thread copies 16-byte chunk `cc` of rows `cr + 8 i`, swizzled to chunk
    // `cc ^ cr` of the row (the row mod 8 is `cr`). As in `flash_attn_bwd_dkdv`, the math runs
    // on whole halves of 64 columns: chunks past d in a half that is read are zero-filled.
    let cc = tid % 16;
    let cr = tid / 16;
    let c_on = (((cc / 8) * 64) as usize) < d;
    let c_in = ((cc * 8) as usize) < d;
    let c_dst = cr * 64 + (cc ^ cr) * 4;
    // Q and dO pass through the arrays' second halves with one row tile, so the first K and V
    // tile (in the first halves) comes in the same group, and a block waits on memory once
    // before its first products; with two they fill the arrays, and that tile follows once
    // the warps hold their fragments.
    let q_at = (if rt == 1 { 4096 } else { 0 }) as u32;
    if c_on {
        for i in 0..16 {
            if i * 8 < bq {
                let r = (cr + 8 * (i as u32)) as usize;
                let dst = (q_at + c_dst + (i as u32) * 512) as usize;
                let len = if c_in && m0 + r < t_q { 8 } else { 0 };
                let at = q0 + (m0 + r) * q_rs + (cc * 8) as usize;
                cp_async(&mut sk, dst, q, at, len);
                let at = o0 + (m0 + r) * o_rs + (cc * 8) as usize;
                cp_async(&mut sv, dst, dout, at, len);
            }
            if rt == 1 && i < 4 && tiles > 0 {
                let r = (cr + 8 * (i as u32)) as usize;
                let len = if c_in && r < n_end { 8 } else { 0 };
                let at = k0 + r * k_rs + (cc * 8) as usize;
                cp_async(&mut sk, (c_dst + (i as u32) * 512) as usize, k, at, len);
                cp_async(&mut sv, (c_dst + (i as u32) * 512) as usize, v, at, len);
            }
        }
    }
    cp_async_commit();
    cp_async_wait(0);
    sync_threads();

    // `ldmatrix` addressing: this lane gives row `r8` of matrix `quad`; every row it names is
    // r8 mod 8, so its chunks are swizzled by `r8`.
    let quad = lane / 8;
    let r8 = lane % 8;
    // Q and dO, A fragments (16 x 16 per step `ks` of 16 along d) of row tile `mi`: row
    // `(quad % 2) * 8 + r8` of the warp's 16 in the tile, chunk `2 ks + quad / 2`, held at
    // `(4 mi + ks) 4` (`ks` runs to 8 only where there is one row tile).
    let mut qf = [0u32; 32];
    let mut df = [0u32; 32];
    let a_row = (warp * 16 + (quad % 2) * 8 + r8) * 64;
    for mi in 0..2 {
        if mi < rt {
            for h in 0..2 {
                if h * 64 < d {
                    for k4 in 0..4 {
                        let ks = h * 4 + k4;
                        let ch = (2 * (ks as u32) + quad / 2) ^ r8;
                        let word = (q_at + a_row + (mi as u32) * 4096 + ch * 4) as usize;
                        ldmatrix_x4(&mut qf, (mi * 4 + ks) * 4, &sk, word);
                        ldmatrix_x4(&mut df, (mi * 4 + ks) * 4, &sv, word);
                    }
                }
            }
        }
    }
    // K and V rows as B fragments of their transposes (16 along d x 8 keys), two key tiles per
    // `ldmatrix_x4`: key row `np * 16 + (quad / 2) * 8 + r8`, chunk `2 ks + quad % 2`.
    let b_row = ((quad / 2) * 8 + r8) * 64;
    // K read transposed, B fragments (16 keys x 8 along d), two d tiles per
    // `ldmatrix_x4_trans`: key row `kk * 16 + (quad % 2) * 8 + r8`, chunk `2 dp + quad / 2`.
    let t_row = ((quad % 2) * 8 + r8) * 64;

    // Accumulator element `i` of a tile is row `g + 8 (i / 2)`, column `2 t4 + i % 2`: this
    // lane holds query rows `row0 + 64 mi` and `row0 + 64 mi + 8` of each row tile `mi`. Row
    // tile `mi`'s scores start at `s[16 mi]`, its dq at `acc[32 mi]`, its dS fragments at
    // `pf[8 mi]`, its rows' lse and D at `[2 mi]`.
    let g = lane / 4;
    let t4 = lane % 4;
    let row0 = m0 + (warp * 16 + g) as usize;
    // lse and D of the lane's rows; a row without a key (lse -inf) or past t_q gets +inf, so
    // each exp of it is exp(-inf) = 0.
    let mut lr = [T::INFINITY; 4];
    let mut dr = [0.0; 4];
    for mi in 0..2 {
        if mi < rt {
            for h in 0..2 {
                let row = row0 + mi * 64 + h * 8;
                if row < t_q {
                    let l = lse[b * t_q + row];
                    if l != T::NEG_INFINITY {
                        lr[mi * 2 + h] = l * 1.4426950408889634;
                    }
                    dr[mi * 2 + h] = delta[b * t_q + row];
                }
            }
        }
    }
    let mut acc = [0.0; 64];
    let mut s = [0.0; 32];
    let mut dps = [0.0; 32];
    let mut kf = [0u32; 8];
    let mut tf = [0u32; 4];
    let mut pf = [0u32; 16];

    // With two row tiles, every warp has its Q and dO fragments before the first K and V
    // copies overwrite them.
    if rt > 1 {
        sync_threads();
        if tiles > 0 && c_on {
            for i in 0..4 {
                let r = (cr + 8 * (i as u32)) as usize;
                let len = if c_in && r < n_end { 8 } else { 0 };
                let at = k0 + r * k_rs + (cc * 8) as usize;
                cp_async(&mut sk, (c_dst + (i as u32) * 512) as usize, k, at, len);
                cp_async(&mut sv, (c_dst + (i as u32) * 512) as usize, v, at, len);
            }
        }
    }
    cp_async_commit();

    let mut j = 0;
    while j < tiles {
        let n0 = j * 32;
        let stage = ((j % 2) * 2048) as u32;
        // Tile `j` has landed for every thread, and every warp is done with tile `j - 1`,
        // whose stage the copies below overwrite with tile `j + 1`.
        cp_async_wait(0);
        sync_threads();
        if j + 1 < tiles && c_on {
            let next = (((j + 1) % 2) * 2048) as u32;
            for i in 0..4 {
                let r = n0 + 32 + (cr + 8 * (i as u32)) as usize;
                let len = if c_in && r < n_end { 8 } else { 0 };
                let at = k0 + r * k_rs + (cc * 8) as usize;
                cp_async(
                    &mut sk,
                    (next + c_dst + (i as u32) * 512) as usize,
                    k,
                    at,
                    len,
                );
                cp_async(
                    &mut sv,
                    (next + c_dst + (i as u32) * 512) as usize,
                    v,
                    at,
                    len,
                );
            }
        }
        cp_async_commit();

        // S = Q K^T and dP = dO V^T, 16 x 32 each per row tile of this warp; each K and V
        // fragment feeds every row tile.
        for x in 0..32 {
            s[x] = 0.0;
            dps[x] = 0.0;
        }
        for h in 0..2 {
            if h * 64 < d {
                for k4 in 0..4 {
                    let ks = h * 4 + k4;
                    let ch = (2 * (ks as u32) + quad % 2) ^ r8;
                    for np in 0..2 {
                        ldmatrix_x4(
                            &mut kf,
                            np * 4,
                            &sk,
                            (stage + b_row + (np as u32) * 1024 + ch * 4) as usize,
                        );
                    }
                    for mi in 0..2 {
                        if mi < rt {
                            for nt in 0..4 {
                                let at = mi * 16 + nt * 4;
                                mma_m16n8k16(&mut s, at, &qf, (mi * 4 + ks) * 4, &kf, nt * 2);
                            }
                        }
                    }
                    for np in 0..2 {
                        ldmatrix_x4(
                            &mut kf,
                            np * 4,
                            &sv,
                            (stage + b_row + (np as u32) * 1024 + ch * 4) as usize,
                        );
                    }
                    for mi in 0..2 {
                        if mi < rt {
                            for nt in 0..4 {
                                let at = mi * 16 + nt * 4;
                                mma_m16n8k16(&mut dps, at, &df, (mi * 4 + ks) * 4, &kf, nt * 2);
                            }
                        }
                    }
                }
            }
        }

        // dS = P * (dP - D), with the masks only on tiles that cross the valid length or the
        // diagonal (the block's first row has the lowest causal limit).
        let masked = n0 + 32 > kl || (is_causal && n0 + 31 + t_q > m0 + t_k);
        for mi in 0..2 {
            if mi < rt {
                for nt in 0..4 {
                    for i in 0..4 {
                        let x = mi * 16 + nt * 4 + i;
                        let r = mi * 2 + i / 2;
                        let mut p = (s[x] * scale2 - lr[r]).exp2();
                        if masked {
                            let key = n0 + nt * 8 + (t4 * 2) as usize + i % 2;
                            let row = row0 + mi * 64 + (i / 2) * 8;
                            if key >= kl || (is_causal && key + t_q > row + t_k) {
                                p = 0.0;
                            }
                        }
                        s[x] = p * (dps[x] - dr[r]);
                    }
                }
                // dS rounded to T as A fragments: key step `kk` is tiles 2 kk and 2 kk + 1.
                for kk in 0..2 {
                    let x = mi * 16 + kk * 8;
                    let f = mi * 8 + kk * 4;
                    pf[f] = pack2(s[x], s[x + 1]);
                    pf[f + 1] = pack2(s[x + 2], s[x + 3]);
                    pf[f + 2] = pack2(s[x + 4], s[x + 5]);
                    pf[f + 3] = pack2(s[x + 6], s[x + 7]);
                }
            }
        }
        // dQ += dS K (the scale is applied once, on store); each K fragment feeds every row
        // tile.
        for h in 0..2 {
            if h * 64 < d {
                for kk in 0..2 {
                    for d4 in 0..4 {
                        let dp = h * 4 + d4;
                        let ch = (2 * (dp as u32) + quad / 2) ^ r8;
                        ldmatrix_x4_trans(
                            &mut tf,
                            0,
                            &sk,
                            (stage + t_row + (kk as u32) * 1024 + ch * 4) as usize,
                        );
                        for mi in 0..2 {
                            if mi < rt {
                                let at = mi * 32 + dp * 8;
                                let f = mi * 8 + kk * 4;
                                mma_m16n8k16(&mut acc, at, &pf, f, &tf, 0);
                                mma_m16n8k16(&mut acc, at + 4, &pf, f, &tf, 2);
                            }
                        }
                    }
                }
            }
        }
        j += 1;
    }

    for mi in 0..2 {
        if mi < rt {
            for h in 0..2 {
                let row = row0 + mi * 64 + h * 8;
                if row < t_q {
                    for dt in 0..16 {
                        if dt * 8 < d {
                            let at = q0 + row * q_rs + dt * 8 + (t4 * 2) as usize;
                            let x = mi * 32 + dt * 4 + h * 2;
                            dq[at] = acc[x] * scale;
                            dq[at + 1] = acc[x + 1] * scale;
                        }
                    }
                }
            }
        }
    }
}
