//! The FlashAttention-2-style backward written with `#[kernel]` (`kernels::flash_attn_bwd_*`),
//! run on the CPU's block emulation against the gradients of a plain attention in f64 computed
//! from the same (rounded) f16 and bf16 inputs: both head dims, causal or not, with and without
//! key padding (rows with no valid key included), and sizes with ragged edges in queries and
//! keys. The emulation computes what the GPU computes (PTX's fragment layouts, `cp.async`
//! landing at its wait), so this tests the kernels' indexing, masks and pipelines without a GPU.
//!
//! The reference takes `o` and `lse` from an f64 forward, then rounds `o` to `T` and `lse` to
//! f32 and hands both to the kernels, as a real forward would; its `D_i = do_i . o_i` is of the
//! rounded `o`, so the comparison measures the backward's own error alone.
//!
//! Tolerances. Products and sums run in f32 (relative errors of order 1e-6); what dominates is
//! the rounding to `T` (unit roundoff `u`: 2^-8 for bf16, 2^-11 for f16) of what feeds the
//! tensor cores and of the outputs. `dv_j = sum_i P_ij do_i` rounds each `P_ij` (error
//! `u P_ij`), so `|dv - ref| <= u sum_i P_ij |do_i|` plus `u |dv|` for the store, which that sum
//! bounds too: the test allows `2.5 u A` with `A = sum_i P_ij |do_ic|`, the 0.5 for the f32
//! terms. `dk` and `dq` round `dS_ij`, of size at most `P_ij (|dP_ij| + |D_i|)`, so `A` is
//! `scale sum_i P_ij (|dP_ij| + |D_i|) |q_ic|` for `dk` and the same over keys with `|k_jc|` for
//! `dq`. For f16, whose small values are subnormal with a fixed spacing of 2^-24, each rounded
//! term may also be off by 2^-25 absolutely, which adds `2^-25` times the sum of the `|do|`,
//! `scale |q|` or `scale |k|` of the terms (plus one for the store). A gradient the reference
//! makes zero (masked keys, rows with no key) must be exactly zero. A real bug is far outside:
//! a missing `- D`, an extra or missing key, or a wrong row moves an output by a fraction of
//! `A` itself, not of `u A`.

use half::{bf16, f16};
use rtx_kernels::kernels::{
    flash_attn_bwd_dkdv, flash_attn_bwd_dkdv_launch, flash_attn_bwd_dkdv_wgmma,
    flash_attn_bwd_dkdv_wgmma_launch, flash_attn_bwd_dq, flash_attn_bwd_dq_launch,
    flash_attn_bwd_dq_wgmma, flash_attn_bwd_dq_wgmma_launch, flash_attn_bwd_rowdot,
    flash_attn_bwd_rowdot_launch, flash_attn_dense_strides,
};
use rtx_kernels::{DType, Float};

use crate::flash_common::{Case, case, input, padded};

/// The f64 forward: the probabilities `[bh, t_q, t_k]` (0 where masked), `o` and `lse`, a row
/// without keys giving zeros and -inf.
fn forward(c: &Case, q: &[f64], k: &[f64], v: &[f64], scale: f64) -> [Vec<f64>; 3] {
    let (t_q, t_k, d) = (c.t_q, c.t_k, c.d);
    let mut p = vec![0.0; c.bh * t_q * t_k];
    let mut o = vec![0.0; c.bh * t_q * d];
    let mut lse = vec![f64::NEG_INFINITY; c.bh * t_q];
    for b in 0..c.bh {
        let len = c.key_len.as_ref().map_or(t_k, |l| (l[b] as usize).min(t_k));
        for i in 0..t_q {
            let keys: Vec<usize> = (0..len)
                .filter(|&j| !c.causal || j + t_q <= i + t_k)
                .collect();
            if keys.is_empty() {
                continue;
            }
            let qi = &q[(b * t_q + i) * d..][..d];
            let s: Vec<f64> = keys
                .iter()
                .map(|&j| {
                    let kj = &k[(b * t_k + j) * d..][..d];
                    scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f64>()
                })
                .collect();
            let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let l: f64 = s.iter().map(|x| (x - m).exp()).sum();
            let row_lse = m + l.ln();
            lse[b * t_q + i] = row_lse;
            for (&j, s) in keys.iter().zip(&s) {
                let pij = (s - row_lse).exp();
                p[(b * t_q + i) * t_k + j] = pij;
                for e in 0..d {
                    o[(b * t_q + i) * d + e] += pij * v[(b * t_k + j) * d + e];
                }
            }
        }
    }
    [p, o, lse]
}

/// One gradient of the reference with, per element, the tolerance of the module's
/// documentation.
struct Grad {
    want: Vec<f64>,
    tol: Vec<f64>,
}

/// The f64 backward from the forward's probabilities `p` and the rounded output `o`: `D`, then
/// `dq`, `dk` and `dv` with their tolerances for unit roundoff `u` and subnormal spacing error
/// `tiny`.
fn backward(
    c: &Case,
    [q, k, v, dout, o, p]: [&[f64]; 6],
    scale: f64,
    u: f64,
    tiny: f64,
) -> (Vec<f64>, [Grad; 3]) {
    let (t_q, t_k, d) = (c.t_q, c.t_k, c.d);
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    let delta: Vec<f64> = (0..c.bh * t_q)
        .map(|r| dot(&dout[r * d..][..d], &o[r * d..][..d]))
        .collect();
    let mut g = [t_q, t_k, t_k].map(|len| Grad {
        want: vec![0.0; c.bh * len * d],
        tol: vec![0.0; c.bh * len * d],
    });
    let [dq, dk, dv] = &mut g;
    for b in 0..c.bh {
        for i in 0..t_q {
            let r = b * t_q + i;
            for j in 0..t_k {
                let pij = p[r * t_k + j];
                if pij == 0.0 {
                    continue;
                }
                let kr = b * t_k + j;
                let dp = dot(&dout[r * d..][..d], &v[kr * d..][..d]);
                let ds = pij * (dp - delta[r]);
                // What bounds |dS_ij|, whatever cancels in dP - D.
                let ds_size = pij * (dp.abs() + delta[r].abs());
                for e in 0..d {
                    let (qe, ke, de) = (q[r * d + e], k[kr * d + e], dout[r * d + e]);
                    dq.want[r * d + e] += scale * ds * ke;
                    dq.tol[r * d + e] +=
                        2.5 * u * scale * ds_size * ke.abs() + tiny * (1.0 + scale * ke.abs());
                    dk.want[kr * d + e] += scale * ds * qe;
                    dk.tol[kr * d + e] +=
                        2.5 * u * scale * ds_size * qe.abs() + tiny * (1.0 + scale * qe.abs());
                    dv.want[kr * d + e] += pij * de;
                    dv.tol[kr * d + e] += 2.5 * u * pij * de.abs() + tiny * (1.0 + de.abs());
                }
            }
        }
    }
    (delta, g)
}

/// Runs `c` in `T` (unit roundoff `u`, subnormal rounding error `tiny`) through the three
/// kernels and holds each result to the reference: with `flash_attn_bwd_dq` in blocks of 64
/// queries and, up to a d of 64, of 128 too.
fn check<T: Float<Acc = f32>>(c: &Case, seed: u64, u: f64, tiny: f64) {
    for rows in [64, 128] {
        if rows == 64 || c.d <= 64 {
            check_on::<T>(Bwd::Sync { dq_rows: rows }, c, seed, u, tiny);
        }
    }
}

/// Which backward kernels run.
#[derive(Clone, Copy)]
enum Bwd {
    /// `flash_attn_bwd_dkdv`, and `flash_attn_bwd_dq` in blocks of `dq_rows` queries.
    Sync { dq_rows: usize },
    /// `flash_attn_bwd_dkdv_wgmma` and `flash_attn_bwd_dq_wgmma`.
    Wgmma,
}

/// [`check`] with the kernels `bwd` names.
fn check_on<T: Float<Acc = f32>>(bwd: Bwd, c: &Case, seed: u64, u: f64, tiny: f64) {
    let wgmma = matches!(bwd, Bwd::Wgmma);
    let (bh, t_q, t_k, d) = (c.bh, c.t_q, c.t_k, c.d);
    // Scores of standard deviation about 1.3 after scaling: sharp enough that probabilities
    // span orders of magnitude, flat enough that many keys matter.
    let (q, q64) = input::<T>(bh * t_q * d, seed, 2.0);
    let (k, k64) = input::<T>(bh * t_k * d, seed + 1, 2.0);
    let (v, v64) = input::<T>(bh * t_k * d, seed + 2, 1.0);
    let (dout, dout64) = input::<T>(bh * t_q * d, seed + 3, 1.0);
    let scale = 1.0 / (d as f64).sqrt();
    // The kernels scale in f32.
    let scale_used = f64::from(scale as f32);
    let [p, o64, lse64] = forward(c, &q64, &k64, &v64, scale_used);
    let o: Vec<T> = o64.iter().map(|&x| T::from_f64(x)).collect();
    let o_rounded: Vec<f64> = o.iter().map(|x| x.to_f64()).collect();
    let lse: Vec<f32> = lse64.iter().map(|&x| x as f32).collect();
    let (want_delta, [rdq, rdk, rdv]) = backward(
        c,
        [&q64, &k64, &v64, &dout64, &o_rounded, &p],
        scale_used,
        u,
        tiny,
    );

    let mut delta = vec![-7.0f32; bh * t_q];
    flash_attn_bwd_rowdot(
        flash_attn_bwd_rowdot_launch(1, bh, t_q),
        &o,
        &dout,
        &mut delta,
        c.strides(t_q),
        1,
        bh,
        t_q,
        d,
    )
    .unwrap();
    // Garbage in the outputs: every element must be written.
    let mut dq = vec![T::from_f64(-7.0); bh * t_q * d];
    let mut dk = vec![T::from_f64(-7.0); bh * t_k * d];
    let mut dv = vec![T::from_f64(-7.0); bh * t_k * d];
    let lens = c.key_len.clone().unwrap_or_default();
    let (causal, padded) = (u32::from(c.causal), u32::from(c.key_len.is_some()));
    let (qs, ks) = (c.strides(t_q), c.strides(t_k));
    let (dkdv, launch) = if wgmma {
        (
            flash_attn_bwd_dkdv_wgmma as DkDv<T>,
            flash_attn_bwd_dkdv_wgmma_launch(1, bh, t_k),
        )
    } else {
        (
            flash_attn_bwd_dkdv as DkDv<T>,
            flash_attn_bwd_dkdv_launch(1, bh, t_k),
        )
    };
    dkdv(
        launch, &q, &k, &v, &dout, &lse, &delta, &mut dk, &mut dv, &lens, qs, ks, qs, 1, bh, t_q,
        t_k, d, scale, causal, padded,
    )
    .unwrap();
    match bwd {
        Bwd::Wgmma => flash_attn_bwd_dq_wgmma(
            flash_attn_bwd_dq_wgmma_launch(1, bh, t_q),
            &q,
            &k,
            &v,
            &dout,
            &lse,
            &delta,
            &mut dq,
            &lens,
            qs,
            ks,
            qs,
            1,
            bh,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
        ),
        Bwd::Sync { dq_rows } => flash_attn_bwd_dq(
            flash_attn_bwd_dq_launch(1, bh, t_q, dq_rows),
            &q,
            &k,
            &v,
            &dout,
            &lse,
            &delta,
            &mut dq,
            &lens,
            qs,
            ks,
            qs,
            1,
            bh,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
            dq_rows,
        ),
    }
    .unwrap();

    let what = format!("{:?} {c:?}", T::DTYPE);
    for r in 0..bh * t_q {
        // f32 sums of d products, in another order than the reference's.
        let size: f64 = (0..d)
            .map(|e| (dout64[r * d + e] * o_rounded[r * d + e]).abs())
            .sum();
        let (got, want) = (f64::from(delta[r]), want_delta[r]);
        assert!(
            (got - want).abs() <= 1e-6 * size,
            "{what}: D[{r}] = {got}, want {want}"
        );
    }
    for (name, got, want, len) in [
        ("dq", &dq, &rdq, t_q),
        ("dk", &dk, &rdk, t_k),
        ("dv", &dv, &rdv, t_k),
    ] {
        for (i, g) in got.iter().enumerate() {
            let (g, w, tol) = (g.to_f64(), want.want[i], want.tol[i]);
            assert!(
                (g - w).abs() <= tol,
                "{what}: {name}[{}][{}][{}] = {g}, want {w} (tolerance {tol})",
                i / d / len,
                i / d % len,
                i % d
            );
        }
    }
}

/// The signature both dK/dV kernels share.
type DkDv<T> = fn(
    rtx_kernels::kernel::LaunchConfig,
    &[T],
    &[T],
    &[T],
    &[T],
    &[f32],
    &[f32],
    &mut [T],
    &mut [T],
    &[u32],
    rtx_kernels::kernel::KernelStrides,
    rtx_kernels::kernel::KernelStrides,
    rtx_kernels::kernel::KernelStrides,
    usize,
    usize,
    usize,
    usize,
    usize,
    f64,
    u32,
    u32,
) -> Result<(), rtx_kernels::kernel::LaunchError>;

/// dQ, dK and dV on `wgmma` (head dims 64 and 128): ragged sizes, several key blocks and query
/// tiles, both causal shapes, and key padding, held to the same f64 reference.
#[test]
fn wgmma_backward_matches_f64() {
    let cases = [
        case(1, 1, 1, 64, false),
        case(2, 17, 100, 128, false),
        case(1, 130, 260, 64, false),
        case(1, 200, 200, 128, true),
        case(1, 17, 150, 64, true),
        case(1, 150, 40, 128, true),
        padded(2, 100, 140, 128, false, &[140, 37]),
    ];
    for (i, c) in cases.iter().enumerate() {
        let seed = 900 + 10 * i as u64;
        check_on::<bf16>(Bwd::Wgmma, c, seed, BF16_U, 0.0);
        check_on::<f16>(Bwd::Wgmma, c, seed + 5, F16_U, F16_TINY);
    }
}

const BF16_U: f64 = 1.0 / 256.0;
const F16_U: f64 = 1.0 / 2048.0;
/// Half the spacing of f16's subnormals; bf16's (2^-134) are out of reach of these values.
const F16_TINY: f64 = 1.0 / (1u64 << 25) as f64;

/// Which element types a case runs in.
#[derive(Clone, Copy)]
enum In {
    Bf16,
    F16,
    Both,
}

/// Runs each case in its element types, each from its own inputs.
fn check_all(cases: &[(In, Case)], seed: u64) {
    for (i, (dtypes, c)) in cases.iter().enumerate() {
        let seed = seed + 10 * i as u64;
        if matches!(dtypes, In::Bf16 | In::Both) {
            check::<bf16>(c, seed, BF16_U, 0.0);
        }
        if matches!(dtypes, In::F16 | In::Both) {
            check::<f16>(c, seed + 5, F16_U, F16_TINY);
        }
    }
}

#[test]
fn full_attention_gradients_match_f64_with_ragged_edges() {
    // One query and key; fewer queries than a tile over keys ending mid-block; more queries
    // than keys; a key block and a query block exactly; several blocks and tiles both ways.
    check_all(
        &[
            (In::Both, case(1, 1, 1, 64, false)),
            (In::Bf16, case(2, 17, 100, 128, false)),
            (In::F16, case(1, 100, 17, 64, false)),
            (In::F16, case(1, 64, 64, 128, false)),
            (In::Bf16, case(1, 130, 130, 64, false)),
        ],
        100,
    );
}

#[test]
fn causal_attention_gradients_match_f64_with_the_diagonal_bottom_right() {
    // Square across several blocks and tiles; more keys than queries; more queries than keys,
    // where the first t_q - t_k queries see no key (zero dq) and a whole tile of them is skipped.
    check_all(
        &[
            (In::Bf16, case(1, 130, 130, 128, true)),
            (In::F16, case(1, 130, 130, 64, true)),
            (In::Both, case(1, 1, 1, 128, true)),
            (In::F16, case(2, 17, 64, 64, true)),
            (In::Bf16, case(1, 100, 17, 128, true)),
            // A head dim that is neither: the second half of the columns is partly zero-filled.
            (In::F16, case(1, 33, 70, 72, true)),
            // A small head dim, with the dq kernel's second row tile crossing the diagonal in
            // a second block of queries.
            (In::Bf16, case(1, 200, 200, 32, true)),
        ],
        200,
    );
}

#[test]
fn key_padding_gradients_match_f64() {
    // Per-row lengths: a partial block, none (every query of the row sees no key: zero dq, dk
    // and dv), past t_k; then padding and the causal mask together.
    check_all(
        &[
            (In::Both, padded(2, 100, 100, 64, false, &[37, 0])),
            (In::Bf16, padded(2, 130, 130, 128, true, &[70, 135])),
            (In::F16, padded(1, 17, 100, 128, false, &[65])),
        ],
        300,
    );
}

#[test]
fn f32_is_an_error_not_a_launch() {
    let x = vec![0.0f32; 16];
    let (mut dk, mut dv) = (vec![0.0f32; 16], vec![0.0f32; 16]);
    let launch = flash_attn_bwd_dkdv_launch(1, 1, 1);
    let s = flash_attn_dense_strides(1, 1, 16);
    let err = flash_attn_bwd_dkdv(
        launch,
        &x,
        &x,
        &x,
        &x,
        &[0.0],
        &[0.0],
        &mut dk,
        &mut dv,
        &[],
        s,
        s,
        s,
        1,
        1,
        1,
        1,
        16,
        1.0,
        0,
        0,
    )
    .unwrap_err();
    assert!(err.message().contains("tensor cores"), "{err}");
    for k in [&flash_attn_bwd_dkdv::KERNEL, &flash_attn_bwd_dq::KERNEL] {
        let dtypes: Vec<DType> = k.entries.iter().map(|e| e.dtype).collect();
        assert_eq!(dtypes, [DType::F16, DType::BF16], "{}", k.name);
    }
}
