//! The keys' half of the attention backward on Hopper's warpgroup products (`wgmma`): the
//! computation, operands, layout and masks of
//! [`flash_attn_bwd_dkdv()`](super::flash_attn_bwd_dkdv) for head dims 64 and 128 on GPUs of
//! compute capability 9.0.
//!
//! Each block of two warpgroups takes 128 keys, 64 a warpgroup, and loops over 64-query
//! tiles of Q and dO. Per tile a warpgroup computes `dP^T = V dO^T` and `S^T = K Q^T` with
//! `wgmma_m64n64k16` (K and V rows K-major, the Q and dO tiles' rows the B operands), the
//! probabilities `P^T` and `dS^T = P^T (dP^T - D)` in registers, then `dV += P^T dO` and
//! `dK += dS^T Q` with `wgmma_rs_m64n{d}k16`: the same Q and dO tiles, read as N-major B
//! operands (rows along K, the queries), so every tile is copied once, as it lies.
//!
//! Invariant: every size works, as for the `mma.sync` kernel: keys and queries past the valid
//! lengths are zero-filled and contribute nothing, and every key row of a block is stored.

use crate::Float;
use crate::kernel::LaunchConfig;
use rtx_macros::kernel;

/// Threads per block of [`flash_attn_bwd_dkdv_wgmma()`]: two warpgroups, 64 keys each.
pub const FLASH_ATTN_BWD_WGMMA_THREADS: u32 = 256;

/// The launch of [`flash_attn_bwd_dkdv_wgmma()`] over `batch x heads` rows of `t_k` keys: a
/// grid of `ceil(t_k / 128) x heads x batch` blocks of [`FLASH_ATTN_BWD_WGMMA_THREADS`].
pub fn flash_attn_bwd_dkdv_wgmma_launch(batch: usize, heads: usize, t_k: usize) -> LaunchConfig {
    LaunchConfig::new(
        (t_k.div_ceil(128) as u32, heads as u32, batch as u32),
        FLASH_ATTN_BWD_WGMMA_THREADS,
    )
}

/// `dk` and `dv` on `wgmma`, f16 or bf16: [`flash_attn_bwd_dkdv()`](super::flash_attn_bwd_dkdv)'s
/// results (the same arguments) for `d` 64 or 128, launched with
/// [`flash_attn_bwd_dkdv_wgmma_launch`]. On a GPU it needs compute capability 9.0.
///
/// Shared memory, 96 KiB: K and V (128 rows, 32 KiB each) and one 64-query tile each of Q and
/// dO (16 KiB each), every tile as 64-column panels of 128-byte rows in the 128-byte swizzle.
#[kernel(crate = crate, specialize(d = 64, 128), launch_bounds(256, 1))]
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_bwd_dkdv_wgmma<T: Float>(
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
    // K and V: two panels of 128 rows (4096 words each); Q and dO: two panels of 64 rows.
    #[shared]
    let sk: [u32; 8192];
    #[shared]
    let sv: [u32; 8192];
    #[shared]
    let sq: [u32; 4096];
    #[shared]
    let sdo: [u32; 4096];
    let tid = thread_idx_x() as u32;
    let wg = tid / 128;
    let t = tid % 128;
    let lane = t % 32;
    let warp = t / 32;
    let hh = block_idx_y();
    let n = block_idx_z();
    let n0 = block_idx_x() * 128;
    if n >= batch || hh >= heads || n0 >= t_k {
        return;
    }
    let b = n * heads + hh;
    let q0 = n * qs.stride(0) + hh * qs.stride(1);
    let q_rs = qs.stride(2);
    let k0 = n * ks.stride(0) + hh * ks.stride(1);
    let k_rs = ks.stride(2);
    let o0 = n * os.stride(0) + hh * os.stride(1);
    let o_rs = os.stride(2);
    let scale = scale as T;
    let scale2 = scale * 1.4426950408889634;
    let is_causal = causal != 0;
    let qt: usize = 64;
    let mut kl = t_k;
    if padded != 0 {
        kl = kl.min(key_len[b] as usize);
    }
    // Query tiles that see a key of this block (under the causal mask query `i` sees key `n0`
    // from `i = n0 + t_q - t_k` on); a block wholly past the valid length has none.
    let mut j0: usize = 0;
    if is_causal && n0 + t_q > t_k {
        j0 = (n0 + t_q - t_k) / qt;
    }
    let mut j_end = (t_q + qt - 1) / qt;
    if n0 >= kl {
        j_end = 0;
    }

    // Copies: this thread copies 16-byte chunk `cc` of rows `cr + rstep i`, chunk `cc` lying
    // in panel `cc / 8` at chunk `(cc % 8) ^ (row % 8)`; every row it copies is `cr` mod 8.
    let cpr = (d / 8) as u32;
    let cc = tid % cpr;
    let cr = tid / cpr;
    let rstep = 256 / cpr;
    let c_row = cr * 32 + ((cc % 8) ^ (cr % 8)) * 4;
    // Panels are 4096 words apart in K and V (128 rows), 2048 in Q and dO (64 rows).
    let kv_dst = (cc / 8) * 4096 + c_row;
    let qo_dst = (cc / 8) * 2048 + c_row;
    if j0 < j_end {
        for i in 0..8 {
            let r = (cr + rstep * (i as u32)) as usize;
            if r < 128 {
                let len = if n0 + r < kl { 8 } else { 0 };
                let at = k0 + (n0 + r) * k_rs + (cc * 8) as usize;
                let dst = (kv_dst + (i as u32) * rstep * 32) as usize;
                cp_async(&mut sk, dst, k, at, len);
                cp_async(&mut sv, dst, v, at, len);
            }
            if r < 64 {
                let m = j0 * qt + r;
                let len = if m < t_q { 8 } else { 0 };
                let at = o0 + m * o_rs + (cc * 8) as usize;
                cp_async(
                    &mut sdo,
                    (qo_dst + (i as u32) * rstep * 32) as usize,
                    dout,
                    at,
                    len,
                );
            }
        }
    }
    cp_async_commit();

    // Accumulator element `i`: key `g + 8 ((i / 2) % 2)` of this warp's 16, column
    // `8 (i / 4) + 2 t4 + i % 2` (a query of the tile, or a column of d).
    let g = lane / 4;
    let t4 = lane % 4;
    let key0 = n0 + (wg * 64 + warp * 16 + g) as usize;
    // This warpgroup's 64 keys start 2048 words into each panel of K and V.
    let kv_tile = wg * 2048;
    let mut dka = [0.0; 64];
    let mut dva = [0.0; 64];
    let mut st = [0.0; 32];
    let mut dpt = [0.0; 32];
    let mut pf = [0u32; 16];
    let mut lq = [0.0; 16];
    let mut dl = [0.0; 16];

    let mut j = j0;
    while j < j_end {
        let m0 = j * qt;
        // dO tile `j` (with K and V the first time) has landed for every thread, and every
        // warpgroup is done with the last Q tile, which the copies below overwrite.
        cp_async_wait(0);
        fence_proxy_async();
        sync_threads();
        for i in 0..8 {
            let r = (cr + rstep * (i as u32)) as usize;
            if r < 64 {
                let len = if m0 + r < t_q { 8 } else { 0 };
                let at = q0 + (m0 + r) * q_rs + (cc * 8) as usize;
                cp_async(
                    &mut sq,
                    (qo_dst + (i as u32) * rstep * 32) as usize,
                    q,
                    at,
                    len,
                );
            }
        }
        cp_async_commit();

        // A row without a key (lse -inf) or past t_q gets +inf: each exp is then 0.
        for nt in 0..8 {
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

        // dP^T = V dO^T, 64 keys x 64 queries, while Q's tile is in flight. A 16-wide step
        // along d is 8 words along a panel's rows; steps 4 to 7 are in the second panel.
        for x in 0..32 {
            dpt[x] = 0.0;
        }
        wgmma_fence();
        for kk in 0..8 {
            if kk * 16 < d {
                let step = ((kk / 4) * 4096 + (kk % 4) * 8) as u32;
                let qstep = ((kk / 4) * 2048 + (kk % 4) * 8) as u32;
                wgmma_m64n64k16(
                    &mut dpt,
                    0,
                    &sv,
                    (kv_tile + step) as usize,
                    &sdo,
                    qstep as usize,
                );
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut dpt);

        // Q tile `j` has landed for every thread.
        cp_async_wait(0);
        fence_proxy_async();
        sync_threads();

        // S^T = K Q^T.
        for x in 0..32 {
            st[x] = 0.0;
        }
        wgmma_fence();
        for kk in 0..8 {
            if kk * 16 < d {
                let step = ((kk / 4) * 4096 + (kk % 4) * 8) as u32;
                let qstep = ((kk / 4) * 2048 + (kk % 4) * 8) as u32;
                wgmma_m64n64k16(
                    &mut st,
                    0,
                    &sk,
                    (kv_tile + step) as usize,
                    &sq,
                    qstep as usize,
                );
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut st);

        // P^T, masked only on tiles that cross the valid length or the diagonal.
        let masked = n0 + 128 > kl || (is_causal && n0 + 127 + t_q > m0 + t_k);
        for i in 0..32 {
            let nt = i / 4;
            let mut p = (st[i] * scale2 - lq[nt * 2 + i % 2]).exp2();
            if masked {
                let key = key0 + ((i / 2) % 2) * 8;
                let m = m0 + nt * 8 + (t4 * 2) as usize + i % 2;
                if key >= kl || (is_causal && key + t_q > m + t_k) {
                    p = 0.0;
                }
            }
            st[i] = p;
        }
        // P^T as A fragments: query step `kk` is accumulator elements `8 kk..8 kk + 8`.
        for kk in 0..4 {
            for r in 0..4 {
                pf[kk * 4 + r] = pack2(st[kk * 8 + 2 * r], st[kk * 8 + 2 * r + 1]);
            }
        }
        // dV += P^T dO: dO's tile read N-major, 16 queries (two 8-row groups, 512 words) a
        // step, panels 2048 words apart.
        wgmma_fence();
        for kk in 0..4 {
            let w = (kk as u32 * 512) as usize;
            if d == 128 {
                wgmma_rs_m64n128k16(&mut dva, 0, &pf, kk * 4, &sdo, w, 2048);
            } else {
                wgmma_rs_m64n64k16(&mut dva, 0, &pf, kk * 4, &sdo, w, 2048);
            }
        }
        wgmma_commit();
        // dS^T = P^T (dP^T - D), then as A fragments once `P V` is done with `pf`.
        for i in 0..32 {
            st[i] = st[i] * (dpt[i] - dl[(i / 4) * 2 + i % 2]);
        }
        wgmma_wait(0, &mut dva);
        for kk in 0..4 {
            for r in 0..4 {
                pf[kk * 4 + r] = pack2(st[kk * 8 + 2 * r], st[kk * 8 + 2 * r + 1]);
            }
        }
        // dK += dS^T Q (the scale is applied once, on store).
        wgmma_fence();
        for kk in 0..4 {
            let w = (kk as u32 * 512) as usize;
            if d == 128 {
                wgmma_rs_m64n128k16(&mut dka, 0, &pf, kk * 4, &sq, w, 2048);
            } else {
                wgmma_rs_m64n64k16(&mut dka, 0, &pf, kk * 4, &sq, w, 2048);
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut dka);

        // Every warpgroup is done with dO tile `j` and Q tile `j`: the next dO is copied.
        sync_threads();
        if j + 1 < j_end {
            for i in 0..8 {
                let r = (cr + rstep * (i as u32)) as usize;
                if r < 64 {
                    let m = m0 + qt + r;
                    let len = if m < t_q { 8 } else { 0 };
                    let at = o0 + m * o_rs + (cc * 8) as usize;
                    let dst = (qo_dst + (i as u32) * rstep * 32) as usize;
                    cp_async(&mut sdo, dst, dout, at, len);
                }
            }
        }
        cp_async_commit();
        j += 1;
    }
    cp_async_wait(0);

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

/// Threads per block of [`flash_attn_bwd_dq_wgmma()`]: two warpgroups, 64 queries each.
pub const FLASH_ATTN_BWD_DQ_WGMMA_THREADS: u32 = 256;

/// The launch of [`flash_attn_bwd_dq_wgmma()`] over `batch x heads` rows of `t_q` queries: a
/// grid of `ceil(t_q / 128) x heads x batch` blocks of [`FLASH_ATTN_BWD_DQ_WGMMA_THREADS`].
pub fn flash_attn_bwd_dq_wgmma_launch(batch: usize, heads: usize, t_q: usize) -> LaunchConfig {
    LaunchConfig::new(
        (t_q.div_ceil(128) as u32, heads as u32, batch as u32),
        FLASH_ATTN_BWD_DQ_WGMMA_THREADS,
    )
}

/// `dq` on `wgmma`, f16 or bf16: [`flash_attn_bwd_dq()`](super::flash_attn_bwd_dq)'s results
/// (the same arguments) for `d` 64 or 128, launched with [`flash_attn_bwd_dq_wgmma_launch`].
/// On a GPU it needs compute capability 9.0.
///
/// Each block of two warpgroups takes 128 queries, 64 a warpgroup, whose Q and dO rows stay in
/// shared memory, and streams 64-key tiles of K and V, double-buffered: per tile `S = Q K^T`
/// and `dP = dO V^T` by `wgmma_m64n64k16`, `dS = P (dP - D)` in registers, and `dQ += dS K` by
/// `wgmma_rs_m64n{d}k16` with the K tile read N-major. Shared memory, 128 KiB: Q and dO (32
/// KiB each), two buffers each of K and V (16 KiB each).
#[kernel(crate = crate, specialize(d = 64, 128), launch_bounds(256, 1))]
#[allow(clippy::too_many_arguments)]
pub fn flash_attn_bwd_dq_wgmma<T: Float>(
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
) {
    // Q and dO: two panels of 128 rows (4096 words each). K and V: buffer `j % 2` at 4096 j,
    // two panels of 64 rows each (2048 words).
    #[shared]
    let sq: [u32; 8192];
    #[shared]
    let sdo: [u32; 8192];
    #[shared]
    let sk: [u32; 8192];
    #[shared]
    let sv: [u32; 8192];
    let tid = thread_idx_x() as u32;
    let wg = tid / 128;
    let t = tid % 128;
    let lane = t % 32;
    let warp = t / 32;
    let hh = block_idx_y();
    let n = block_idx_z();
    let bq = 128;
    let m0 = block_idx_x() * bq;
    if n >= batch || hh >= heads || m0 >= t_q {
        return;
    }
    let b = n * heads + hh;
    let q0 = n * qs.stride(0) + hh * qs.stride(1);
    let q_rs = qs.stride(2);
    let k0 = n * ks.stride(0) + hh * ks.stride(1);
    let k_rs = ks.stride(2);
    let o0 = n * os.stride(0) + hh * os.stride(1);
    let o_rs = os.stride(2);
    let scale = scale as T;
    let scale2 = scale * 1.4426950408889634;
    let is_causal = causal != 0;
    // Keys this block reads: the valid ones, up to the causal limit of its last row.
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

    // Copies as in `flash_attn_bwd_dkdv_wgmma`.
    let cpr = (d / 8) as u32;
    let cc = tid % cpr;
    let cr = tid / cpr;
    let rstep = 256 / cpr;
    let c_row = cr * 32 + ((cc % 8) ^ (cr % 8)) * 4;
    let qo_dst = (cc / 8) * 4096 + c_row;
    let kv_dst = (cc / 8) * 2048 + c_row;
    for i in 0..8 {
        let r = (cr + rstep * (i as u32)) as usize;
        if r < 128 {
            let len = if m0 + r < t_q { 8 } else { 0 };
            let dst = (qo_dst + (i as u32) * rstep * 32) as usize;
            cp_async(
                &mut sq,
                dst,
                q,
                q0 + (m0 + r) * q_rs + (cc * 8) as usize,
                len,
            );
            cp_async(
                &mut sdo,
                dst,
                dout,
                o0 + (m0 + r) * o_rs + (cc * 8) as usize,
                len,
            );
        }
        if r < 64 && tiles > 0 {
            let len = if r < n_end { 8 } else { 0 };
            let at = k0 + r * k_rs + (cc * 8) as usize;
            let dst = (kv_dst + (i as u32) * rstep * 32) as usize;
            cp_async(&mut sk, dst, k, at, len);
            cp_async(&mut sv, dst, v, at, len);
        }
    }
    cp_async_commit();

    // Accumulator element `i`: row `g + 8 ((i / 2) % 2)` of this warp's 16, column
    // `8 (i / 4) + 2 t4 + i % 2` (a key of the tile, or a column of d).
    let g = lane / 4;
    let t4 = lane % 4;
    let row0 = m0 + (wg * 64 + warp * 16 + g) as usize;
    let q_tile = wg * 2048;
    // This lane's rows' lse (times log2 e) and D; a row past t_q or without a key gets +inf,
    // so each exp is 0.
    let mut lr = [0.0; 2];
    let mut dr = [0.0; 2];
    for h in 0..2 {
        let row = row0 + h * 8;
        let mut l = T::INFINITY;
        let mut dd = 0.0;
        if row < t_q {
            l = lse[b * t_q + row];
            dd = delta[b * t_q + row];
        }
        if l == T::NEG_INFINITY {
            l = T::INFINITY;
        }
        lr[h] = l * 1.4426950408889634;
        dr[h] = dd;
    }
    let mut acc = [0.0; 64];
    let mut s = [0.0; 32];
    let mut dps = [0.0; 32];
    let mut pf = [0u32; 16];

    let mut j = 0;
    while j < tiles {
        let n0 = j * 64;
        let kb = ((j % 2) * 4096) as u32;
        // Tile `j` has landed for every thread; every warpgroup is done with tile `j - 1`,
        // whose buffer the copies below overwrite.
        cp_async_wait(0);
        fence_proxy_async();
        sync_threads();
        if j + 1 < tiles {
            let n1 = n0 + 64;
            let nb = (4096 - kb) as usize;
            for i in 0..8 {
                let r = (cr + rstep * (i as u32)) as usize;
                if r < 64 {
                    let len = if n1 + r < n_end { 8 } else { 0 };
                    let at = k0 + (n1 + r) * k_rs + (cc * 8) as usize;
                    let dst = nb + (kv_dst + (i as u32) * rstep * 32) as usize;
                    cp_async(&mut sk, dst, k, at, len);
                    cp_async(&mut sv, dst, v, at, len);
                }
            }
        }
        cp_async_commit();

        // S = Q K^T and dP = dO V^T, 64 x 64 each for this warpgroup.
        for x in 0..32 {
            s[x] = 0.0;
            dps[x] = 0.0;
        }
        wgmma_fence();
        for kk in 0..8 {
            if kk * 16 < d {
                let a = (q_tile + ((kk / 4) * 4096 + (kk % 4) * 8) as u32) as usize;
                let bw = (kb + ((kk / 4) * 2048 + (kk % 4) * 8) as u32) as usize;
                wgmma_m64n64k16(&mut s, 0, &sq, a, &sk, bw);
                wgmma_m64n64k16(&mut dps, 0, &sdo, a, &sv, bw);
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut s);
        wgmma_wait(0, &mut dps);

        // dS = P (dP - D), masked only on tiles that cross the valid length or the diagonal.
        let masked = n0 + 64 > kl || (is_causal && n0 + 63 + t_q > m0 + t_k);
        for i in 0..32 {
            let h = (i / 2) % 2;
            let mut p = (s[i] * scale2 - lr[h]).exp2();
            if masked {
                let key = n0 + 8 * (i / 4) + (t4 * 2) as usize + i % 2;
                let row = row0 + h * 8;
                if key >= kl || (is_causal && key + t_q > row + t_k) {
                    p = 0.0;
                }
            }
            s[i] = p * (dps[i] - dr[h]);
        }
        for kk in 0..4 {
            for r in 0..4 {
                pf[kk * 4 + r] = pack2(s[kk * 8 + 2 * r], s[kk * 8 + 2 * r + 1]);
            }
        }
        // dQ += dS K (the scale on store): the K tile read N-major, 16 keys a step.
        wgmma_fence();
        for kk in 0..4 {
            let w = (kb + (kk as u32) * 512) as usize;
            if d == 128 {
                wgmma_rs_m64n128k16(&mut acc, 0, &pf, kk * 4, &sk, w, 2048);
            } else {
                wgmma_rs_m64n64k16(&mut acc, 0, &pf, kk * 4, &sk, w, 2048);
            }
        }
        wgmma_commit();
        wgmma_wait(0, &mut acc);
        j += 1;
    }
    cp_async_wait(0);

    for h in 0..2 {
        let row = row0 + h * 8;
        if row < t_q {
            let at0 = q0 + row * q_rs + (t4 * 2) as usize;
            for nt in 0..16 {
                if nt * 8 < d {
                    dq[at0 + nt * 8] = acc[nt * 4 + h * 2] * scale;
                    dq[at0 + nt * 8 + 1] = acc[nt * 4 + h * 2 + 1] * scale;
                }
            }
        }
    }
}
