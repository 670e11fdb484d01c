//! Fused optimizer updates: one pass over a parameter, its gradient and its state, in place on
//! dense buffers the caller owns.
//!
//! Each element is updated with the same sequence of roundings as PyTorch's single-tensor
//! (`foreach=False`) implementation, computed in `E::Acc`, with state rounded to `E` where
//! PyTorch stores it. Work is split into fixed chunks, so results never depend on the thread
//! count.

use super::{CHUNK, SharedMut, parallel_for};
use crate::{AdamScalars, SgdScalars};
use rtx_kernels::{Float, FloatMath};

/// `torch.lerp(a, b, w)` for a scalar weight, with its two branches (`NEAR`: `|w| < 0.5`,
/// decided once per step by the caller so the element loop has no branch).
#[inline(always)]
fn lerp<A: FloatMath, const NEAR: bool>(a: A, b: A, w: f64) -> A {
    if NEAR {
        a + A::c(w) * (b - a)
    } else {
        b - (b - a) * (A::c(1.0) - A::c(w))
    }
}

/// One element of an Adam step. The const flags say which optional terms the step has
/// (decoupled decay, L2 decay, lerp's branch), so that the loop over a chunk compiles to
/// straight-line vector code: each flag is fixed for a whole step.
#[inline(always)]
fn adam_one<E: Float, const DECAY: bool, const L2: bool, const NEAR: bool>(
    p: &mut E,
    g: E,
    m: &mut E,
    v: &mut E,
    vmax: Option<&mut E>,
    s: &AdamScalars,
) {
    let c = <E::Acc as FloatMath>::c;
    let mut pa = p.to_acc();
    let mut ga = g.to_acc();
    if DECAY {
        pa = E::from_acc(pa * c(s.decay)).to_acc();
    }
    if L2 {
        ga = E::from_acc(ga + c(s.l2) * pa).to_acc();
    }
    *m = E::from_acc(lerp::<_, NEAR>(m.to_acc(), ga, 1.0 - s.beta1));
    let v2 = E::from_acc(v.to_acc() * c(s.beta2)).to_acc();
    *v = E::from_acc(v2 + c(1.0 - s.beta2) * ga * ga);
    let second = match vmax {
        Some(x) => {
            *x = x.max_of(*v);
            *x
        }
        None => *v,
    };
    let denom = second.to_acc().sqrt() / c(s.bias_correction2_sqrt) + c(s.eps);
    *p = E::from_acc(pa + c(s.neg_step_size) * m.to_acc() / denom);
}

/// An Adam step over one chunk without AMSGrad.
#[inline(always)]
fn adam_chunk<E: Float, const DECAY: bool, const L2: bool, const NEAR: bool>(
    p: &mut [E],
    g: &[E],
    m: &mut [E],
    v: &mut [E],
    s: &AdamScalars,
) {
    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m).zip(v) {
        adam_one::<E, DECAY, L2, NEAR>(p, g, m, v, None, s);
    }
}

/// [`adam_chunk`] compiled for AVX2 (8 floats per instruction where the baseline has 4). It
/// performs the same operations in the same order, with no fused multiply-add, so the results
/// are bitwise those of the baseline loop.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn adam_chunk_avx2<E: Float, const DECAY: bool, const L2: bool, const NEAR: bool>(
    p: &mut [E],
    g: &[E],
    m: &mut [E],
    v: &mut [E],
    s: &AdamScalars,
) {
    adam_chunk::<E, DECAY, L2, NEAR>(p, g, m, v, s)
}

/// Runs [`adam_chunk`] with the flags of `s`, in its AVX2 build where the CPU has AVX2.
fn adam_dispatch<E: Float>(p: &mut [E], g: &[E], m: &mut [E], v: &mut [E], s: &AdamScalars) {
    macro_rules! go {
        ($d:literal, $l:literal, $n:literal) => {{
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU supports AVX2, checked just above.
                return unsafe { adam_chunk_avx2::<E, $d, $l, $n>(p, g, m, v, s) };
            }
            adam_chunk::<E, $d, $l, $n>(p, g, m, v, s)
        }};
    }
    let near = (1.0 - s.beta1).abs() < 0.5;
    match (s.decay != 1.0, s.l2 != 0.0, near) {
        (false, false, true) => go!(false, false, true),
        (false, false, false) => go!(false, false, false),
        (true, false, true) => go!(true, false, true),
        (true, false, false) => go!(true, false, false),
        (false, true, true) => go!(false, true, true),
        (false, true, false) => go!(false, true, false),
        (true, true, true) => go!(true, true, true),
        (true, true, false) => go!(true, true, false),
    }
}

/// One Adam/AdamW step over dense buffers of equal length: updates `p`, `m`, `v` (and `vmax`
/// for AMSGrad) in place from the gradient `g`.
pub fn adam<E: Float>(
    p: &mut [E],
    g: &[E],
    m: &mut [E],
    v: &mut [E],
    vmax: Option<&mut [E]>,
    s: &AdamScalars,
) {
    let n = p.len();
    assert!(
        g.len() == n && m.len() == n && v.len() == n,
        "adam: buffers of lengths {n}, {}, {} and {}",
        g.len(),
        m.len(),
        v.len()
    );
    let (pp, mp, vp) = (
        SharedMut(p.as_mut_ptr()),
        SharedMut(m.as_mut_ptr()),
        SharedMut(v.as_mut_ptr()),
    );
    let xp = vmax.map(|x| {
        assert_eq!(x.len(), n, "adam: the AMSGrad buffer's length");
        SharedMut(x.as_mut_ptr())
    });
    parallel_for(n.div_ceil(CHUNK), &|c| {
        let (start, len) = (c * CHUNK, CHUNK.min(n - c * CHUNK));
        let g = &g[start..start + len];
        // SAFETY: chunk `c` of each buffer is written by this job alone; all four buffers
        // hold `n` elements and stay borrowed mutably for the whole call.
        let (p, m, v) = unsafe {
            (
                pp.slice(start, len),
                mp.slice(start, len),
                vp.slice(start, len),
            )
        };
        match xp {
            // AMSGrad is rare: one generic loop, its flags tested per element.
            Some(xp) => {
                // SAFETY: as above.
                let x = unsafe { xp.slice(start, len) };
                let near = (1.0 - s.beta1).abs() < 0.5;
                for ((((p, &g), m), v), x) in p.iter_mut().zip(g).zip(m).zip(v).zip(x) {
                    match (s.decay != 1.0, s.l2 != 0.0, near) {
                        (d, l, true) => adam_any::<E, true>(p, g, m, v, x, s, d, l),
                        (d, l, false) => adam_any::<E, false>(p, g, m, v, x, s, d, l),
                    }
                }
            }
            None => adam_dispatch(p, g, m, v, s),
        }
    });
}

/// [`adam_one`] with AMSGrad's running maximum and the decay flags given at run time.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn adam_any<E: Float, const NEAR: bool>(
    p: &mut E,
    g: E,
    m: &mut E,
    v: &mut E,
    x: &mut E,
    s: &AdamScalars,
    decay: bool,
    l2: bool,
) {
    match (decay, l2) {
        (false, false) => adam_one::<E, false, false, NEAR>(p, g, m, v, Some(x), s),
        (true, false) => adam_one::<E, true, false, NEAR>(p, g, m, v, Some(x), s),
        (false, true) => adam_one::<E, false, true, NEAR>(p, g, m, v, Some(x), s),
        (true, true) => adam_one::<E, true, true, NEAR>(p, g, m, v, Some(x), s),
    }
}

#[inline]
fn sgd_one<E: Float>(p: &mut E, g: E, buf: Option<&mut E>, s: &SgdScalars) {
    let c = <E::Acc as FloatMath>::c;
    let pa = p.to_acc();
    let mut ga = g.to_acc();
    if s.weight_decay != 0.0 {
        ga = E::from_acc(ga + c(s.weight_decay) * pa).to_acc();
    }
    if let Some(b) = buf {
        if s.first {
            *b = E::from_acc(ga);
        } else {
            let scaled = E::from_acc(b.to_acc() * c(s.momentum)).to_acc();
            *b = E::from_acc(scaled + c(1.0 - s.dampening) * ga);
        }
        ga = if s.nesterov {
            E::from_acc(ga + c(s.momentum) * b.to_acc()).to_acc()
        } else {
            b.to_acc()
        };
    }
    *p = E::from_acc(pa + c(-s.lr) * ga);
}

/// One SGD step over dense buffers of equal length: updates `p` (and the momentum buffer
/// `buf`, when momentum is on) in place from the gradient `g`.
pub fn sgd<E: Float>(p: &mut [E], g: &[E], buf: Option<&mut [E]>, s: &SgdScalars) {
    let n = p.len();
    assert_eq!(g.len(), n, "sgd: the gradient's length");
    let pp = SharedMut(p.as_mut_ptr());
    let bp = buf.map(|b| {
        assert_eq!(b.len(), n, "sgd: the momentum buffer's length");
        SharedMut(b.as_mut_ptr())
    });
    parallel_for(n.div_ceil(CHUNK), &|c| {
        let (start, len) = (c * CHUNK, CHUNK.min(n - c * CHUNK));
        let g = &g[start..start + len];
        // SAFETY: chunk `c` of each buffer is written by this job alone; both buffers hold
        // `n` elements and stay borrowed mutably for the whole call.
        let p = unsafe { pp.slice(start, len) };
        match bp {
            Some(bp) => {
                // SAFETY: as above.
                let b = unsafe { bp.slice(start, len) };
                for ((p, &g), b) in p.iter_mut().zip(g).zip(b) {
                    sgd_one(p, g, Some(b), s);
                }
            }
            None => {
                for (p, &g) in p.iter_mut().zip(g) {
                    sgd_one(p, g, None, s);
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Adam loop (its AVX2 build, where the CPU has AVX2) against the formula written out
    /// in f32, bit for bit, with and without each optional term and in both branches of lerp.
    #[test]
    fn adam_paths_agree_bit_for_bit() {
        let n = 1000;
        let g: Vec<f32> = (0..n)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        let p0: Vec<f32> = (0..n)
            .map(|i| ((i * 11) % 89) as f32 / 44.0 - 1.0)
            .collect();
        let m0: Vec<f32> = (0..n).map(|i| ((i * 7) % 23) as f32 / 100.0).collect();
        let v0: Vec<f32> = (0..n).map(|i| ((i * 5) % 19) as f32 / 1000.0).collect();
        for (decay, l2, beta1) in [(1.0, 0.0, 0.9), (0.999, 0.0, 0.9), (1.0, 0.01, 0.3)] {
            let s = AdamScalars {
                decay,
                l2,
                beta1,
                beta2: 0.999,
                bias_correction2_sqrt: 0.05,
                neg_step_size: -0.01,
                eps: 1e-8,
            };
            let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
            adam(&mut p, &g, &mut m, &mut v, None, &s);
            // The formula, element by element, with lerp's branch picked per element.
            for i in 0..n {
                let mut pa = p0[i];
                let mut ga = g[i];
                if decay != 1.0 {
                    pa *= decay as f32;
                }
                if l2 != 0.0 {
                    ga += l2 as f32 * pa;
                }
                let w = 1.0 - beta1;
                let mm = if w.abs() < 0.5 {
                    m0[i] + w as f32 * (ga - m0[i])
                } else {
                    ga - (ga - m0[i]) * (1.0 - w as f32)
                };
                let vv = v0[i] * 0.999f64 as f32 + (1.0 - 0.999f64) as f32 * ga * ga;
                let denom = vv.sqrt() / 0.05f32 + 1e-8f64 as f32;
                let pp = pa + -0.01f32 * mm / denom;
                assert_eq!(
                    (p[i].to_bits(), m[i].to_bits(), v[i].to_bits()),
                    (pp.to_bits(), mm.to_bits(), vv.to_bits()),
                    "element {i}, decay {decay}, l2 {l2}, beta1 {beta1}"
                );
            }
        }
    }

    #[test]
    fn sgd_with_momentum_matches_the_formula() {
        let s = SgdScalars {
            lr: 0.1,
            momentum: 0.9,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
            first: true,
        };
        let mut p = vec![1.0f64; 3 * CHUNK + 5];
        let g = vec![2.0f64; p.len()];
        let mut b = vec![0.0f64; p.len()];
        sgd(&mut p, &g, Some(&mut b), &s);
        sgd(&mut p, &g, Some(&mut b), &SgdScalars { first: false, ..s });
        assert!(b.iter().all(|&x| x == 0.9 * 2.0 + 2.0));
        assert!(
            p.iter()
                .all(|&x| x == 1.0 + -0.1 * 2.0 + -0.1 * (0.9 * 2.0 + 2.0))
        );
    }
}
