//! The FlashAttention-2-style forward written with `#[kernel]` (`kernels::flash_attn_fwd`), run
//! on the CPU's block emulation against a plain attention in f64 computed from the same
//! (rounded) f16 and bf16 inputs: both head dims, causal or not, with and without key padding,
//! and sizes with ragged edges in queries and keys. The emulation computes what the GPU
//! computes (PTX's fragment layouts, `cp.async` landing at its wait), so this tests the kernel's
//! indexing, masks and online softmax without a GPU.
//!
//! Tolerances. Scores, sums and the output accumulate in f32, so they carry errors of order
//! 1e-6 relative; what dominates is the two roundings to `T` of unit roundoff `u` (2^-8 for
//! bf16, 2^-11 for f16): the probabilities, rounded before `P V` (as FlashAttention does), move
//! each output by at most `u * sum_j p_j |v_j| <= u max|v|`, and the output's own rounding by
//! at most `u |o| <= u max|v|`. So `|o - ref| <= 2.5 u max|v|` (the 0.5 for the f32 terms), and
//! the log-sum-exp, which no rounding to `T` touches, is held to 2e-5. A real bug is far
//! outside both: an extra or a missing key moves the log-sum-exp by about `p_j`, of order
//! `1 / t_k` here, and a missing rescale by the change of the row maximum between key tiles.

use half::{bf16, f16};
use rtx_kernels::kernels::{
    FlashWgmmaPlan, flash_attn_dense_strides, flash_attn_fwd, flash_attn_fwd_wgmma,
    flash_attn_launch,
};
use rtx_kernels::{DType, Float};

use crate::flash_common::{Case, case, input, padded};

/// The reference: `(o, lse)` in f64, a row without keys giving zeros and -inf.
fn reference(c: &Case, q: &[f64], k: &[f64], v: &[f64], scale: f64) -> (Vec<f64>, Vec<f64>) {
    let (t_q, t_k, d) = (c.t_q, c.t_k, c.d);
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
            let p: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
            let l: f64 = p.iter().sum();
            lse[b * t_q + i] = m + l.ln();
            for (&j, p) in keys.iter().zip(&p) {
                for e in 0..d {
                    o[(b * t_q + i) * d + e] += p / l * v[(b * t_k + j) * d + e];
                }
            }
        }
    }
    (o, lse)
}

/// Which forward kernel a check runs.
#[derive(Clone, Copy, Debug)]
enum Forward {
    /// `flash_attn_fwd`, on `mma.sync`.
    Mma,
    /// `flash_attn_fwd_wgmma`, on Hopper's warpgroup products, shaped by a plan.
    Wgmma(FlashWgmmaPlan),
}

/// Runs `c` in `T` (unit roundoff `u`) on `flash_attn_fwd` and holds it to the reference.
fn check<T: Float<Acc = f32>>(c: &Case, seed: u64, u: f64) {
    check_on::<T>(Forward::Mma, c, seed, u);
}

/// Runs `c` in `T` (unit roundoff `u`) on `kernel` and holds it to the reference.
fn check_on<T: Float<Acc = f32>>(kernel: Forward, c: &Case, seed: u64, u: f64) {
    let (t_q, t_k, d) = (c.t_q, c.t_k, c.d);
    // Scores of standard deviation about 1.3 after scaling: sharp enough that the row maximum
    // moves between key tiles, flat enough that many keys matter.
    let (q, q64) = input::<T>(c.bh * t_q * d, seed, 2.0);
    let (k, k64) = input::<T>(c.bh * t_k * d, seed + 1, 2.0);
    let (v, v64) = input::<T>(c.bh * t_k * d, seed + 2, 1.0);
    let scale = 1.0 / (d as f64).sqrt();
    let mut o = vec![T::from_f64(-7.0); c.bh * t_q * d];
    let mut lse = vec![-7.0f32; c.bh * t_q];
    let lens = c.key_len.clone().unwrap_or_default();
    let (strides_q, strides_k) = (c.strides(t_q), c.strides(t_k));
    let (causal, padded) = (u32::from(c.causal), u32::from(c.key_len.is_some()));
    match kernel {
        Forward::Mma => flash_attn_fwd(
            flash_attn_launch(1, c.bh, t_q),
            &q,
            &k,
            &v,
            &mut o,
            &mut lse,
            &lens,
            strides_q,
            strides_k,
            strides_q,
            1,
            c.bh,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
        ),
        Forward::Wgmma(plan) => flash_attn_fwd_wgmma(
            plan.launch(1, c.bh, t_q),
            &q,
            &k,
            &v,
            &mut o,
            &mut lse,
            &lens,
            strides_q,
            strides_k,
            strides_q,
            1,
            c.bh,
            t_q,
            t_k,
            d,
            scale,
            causal,
            padded,
            plan.warpgroups as usize,
            plan.stages,
        ),
    }
    .unwrap();
    // The kernel scales in f32.
    let (ro, rlse) = reference(c, &q64, &k64, &v64, f64::from(scale as f32));
    let vmax = v64.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let tol = 2.5 * u * vmax;
    let what = format!(
        "{kernel:?} {:?} bh {} t_q {t_q} t_k {t_k} d {d} causal {} key_len {:?}",
        T::DTYPE,
        c.bh,
        c.causal,
        c.key_len
    );
    for r in 0..c.bh * t_q {
        let (got, want) = (f64::from(lse[r]), rlse[r]);
        if want == f64::NEG_INFINITY {
            assert_eq!(got, want, "{what}: lse of row {r}, which has no key");
            assert!(
                o[r * d..][..d].iter().all(|x| x.to_f64() == 0.0),
                "{what}: row {r} has no key, its output is not zero"
            );
            continue;
        }
        assert!(
            (got - want).abs() <= 2e-5,
            "{what}: lse of row {r}: {got} vs {want}"
        );
        for e in 0..d {
            let (got, want) = (o[r * d + e].to_f64(), ro[r * d + e]);
            assert!(
                (got - want).abs() <= tol,
                "{what}: o[{r}][{e}] = {got}, want {want} (tolerance {tol})"
            );
        }
    }
}

const BF16_U: f64 = 1.0 / 256.0;
const F16_U: f64 = 1.0 / 2048.0;

/// Runs every case in bf16 and in f16, each from its own inputs.
fn check_both(cases: &[Case], seed: u64) {
    for (i, c) in cases.iter().enumerate() {
        let seed = seed + 10 * i as u64;
        check::<bf16>(c, seed, BF16_U);
        check::<f16>(c, seed + 5, F16_U);
    }
}

#[test]
fn full_attention_matches_f64_with_ragged_edges() {
    // One query and key; fewer queries than a block over keys ending mid-tile; more queries
    // than a block over one partial key tile; a tile exactly; five key tiles, so the maximum
    // moves and the rescale matters; head dims that are neither 64 nor 128 (32 with more
    // queries than a block).
    check_both(
        &[
            case(1, 1, 1, 64, false),
            case(2, 17, 100, 128, false),
            case(1, 100, 17, 64, false),
            case(3, 64, 64, 64, false),
            case(1, 17, 300, 128, false),
            case(1, 40, 70, 80, false),
            case(1, 150, 90, 32, false),
        ],
        100,
    );
}

#[test]
fn causal_attention_matches_f64_with_the_diagonal_bottom_right() {
    // Square, across several query blocks and key tiles; more keys than queries (each query
    // sees the keys before its own place at the end); more queries than keys, where the first
    // t_q - t_k queries see no key (zeros, lse -inf) and a whole block has nothing to do;
    // three blocks of 128 rows, run last rows first.
    check_both(
        &[
            case(1, 130, 130, 128, true),
            case(1, 260, 260, 64, true),
            case(3, 64, 64, 64, true),
            case(1, 1, 1, 128, true),
            case(1, 17, 130, 128, true),
            case(2, 100, 17, 64, true),
        ],
        200,
    );
}

#[test]
fn key_padding_matches_f64() {
    // Per-row lengths: all keys, a partial tile, none (zeros, lse -inf), and past t_k; then
    // padding and the causal mask together.
    check_both(
        &[
            padded(3, 100, 100, 128, false, &[100, 37, 0]),
            padded(2, 130, 130, 64, true, &[70, 135]),
            padded(1, 17, 100, 64, false, &[65]),
        ],
        300,
    );
}

/// The `wgmma` forward (head dims 64 and 128) on the same kinds of case, in each of its
/// plans (blocks of one or two warpgroups, one or two K/V buffers): ragged edges in queries
/// and keys, several 128-key tiles (the maximum moves between them), both warpgroups of a
/// block and several blocks, the causal diagonal with more keys or more queries, and key
/// padding with and without it.
#[test]
fn wgmma_forward_matches_f64() {
    let cases = [
        case(1, 1, 1, 64, false),
        case(2, 17, 100, 128, false),
        case(1, 100, 300, 64, false),
        case(1, 200, 260, 128, false),
        case(1, 260, 260, 64, true),
        case(1, 130, 130, 128, true),
        case(1, 17, 300, 128, true),
        case(2, 100, 17, 64, true),
        padded(3, 100, 100, 128, false, &[100, 37, 0]),
        padded(2, 130, 200, 64, true, &[70, 300]),
    ];
    for (i, c) in cases.iter().enumerate() {
        let seed = 700 + 10 * i as u64;
        for (warpgroups, stages) in [(2, 2), (1, 2), (1, 1)] {
            let plan = Forward::Wgmma(FlashWgmmaPlan { warpgroups, stages });
            check_on::<bf16>(plan, c, seed, BF16_U);
            check_on::<f16>(plan, c, seed + 5, F16_U);
        }
    }
}

#[test]
fn f32_is_an_error_not_a_launch() {
    let (mut o, mut lse) = (vec![0.0f32; 16], vec![0.0f32; 1]);
    let x = vec![0.0f32; 16];
    let launch = flash_attn_launch(1, 1, 1);
    let s = flash_attn_dense_strides(1, 1, 16);
    let err = flash_attn_fwd(
        launch,
        &x,
        &x,
        &x,
        &mut o,
        &mut lse,
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
    let dtypes: Vec<DType> = flash_attn_fwd::KERNEL
        .entries
        .iter()
        .map(|e| e.dtype)
        .collect();
    assert_eq!(dtypes, [DType::F16, DType::BF16]);
}
