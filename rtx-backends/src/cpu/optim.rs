//! Fused optimizer updates: one pass over a parameter, its gradient and its state, in place on
//! dense buffers the caller owns.
//!
//! Each element is updated with the same sequence of roundings as PyTorch's single-tensor
//! (`foreach=False`) implementation, computed in `E::Acc`, with state rounded to `E` where
//! PyTorch stores it. Work is split into fixed chunks, so results never depend on the thread
//! count.

use super::CHUNK;
use rayon::prelude::*;
use rtx_kernels::{Float, FloatMath};

/// The per-step scalars of an Adam or AdamW update, computed by the caller in `f64` exactly as
/// PyTorch computes them in Python.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamScalars {
    /// `1 - lr * weight_decay` for decoupled decay (AdamW), else 1 (no multiply).
    pub decay: f64,
    /// L2 weight decay added to the gradient (Adam), else 0.
    pub l2: f64,
    /// `beta1`.
    pub beta1: f64,
    /// `beta2`.
    pub beta2: f64,
    /// `sqrt(1 - beta2^step)`.
    pub bias_correction2_sqrt: f64,
    /// `-lr / (1 - beta1^step)`.
    pub neg_step_size: f64,
    /// `eps`.
    pub eps: f64,
}

/// The per-step scalars of an SGD update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdScalars {
    /// The learning rate.
    pub lr: f64,
    /// Momentum factor (0: plain SGD, and no buffer).
    pub momentum: f64,
    /// Dampening of the gradient added to the momentum buffer.
    pub dampening: f64,
    /// L2 weight decay added to the gradient.
    pub weight_decay: f64,
    /// Nesterov momentum.
    pub nesterov: bool,
    /// Whether the momentum buffer is new: it becomes the gradient itself (PyTorch's first
    /// step).
    pub first: bool,
}

/// `torch.lerp(a, b, w)` for a scalar weight, with its two branches.
#[inline]
fn lerp<A: FloatMath>(a: A, b: A, w: f64) -> A {
    if w.abs() < 0.5 {
        a + A::c(w) * (b - a)
    } else {
        b - (b - a) * (A::c(1.0) - A::c(w))
    }
}

#[inline]
fn adam_one<E: Float>(
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
    if s.decay != 1.0 {
        pa = E::from_acc(pa * c(s.decay)).to_acc();
    }
    if s.l2 != 0.0 {
        ga = E::from_acc(ga + c(s.l2) * pa).to_acc();
    }
    *m = E::from_acc(lerp(m.to_acc(), ga, 1.0 - s.beta1));
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
    let chunks = p
        .par_chunks_mut(CHUNK)
        .zip(g.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK))
        .zip(v.par_chunks_mut(CHUNK));
    match vmax {
        Some(vmax) => chunks
            .zip(vmax.par_chunks_mut(CHUNK))
            .for_each(|((((p, g), m), v), x)| {
                for ((((p, &g), m), v), x) in p.iter_mut().zip(g).zip(m).zip(v).zip(x) {
                    adam_one(p, g, m, v, Some(x), s);
                }
            }),
        None => chunks.for_each(|(((p, g), m), v)| {
            for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m).zip(v) {
                adam_one(p, g, m, v, None, s);
            }
        }),
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
    let chunks = p.par_chunks_mut(CHUNK).zip(g.par_chunks(CHUNK));
    match buf {
        Some(buf) => chunks
            .zip(buf.par_chunks_mut(CHUNK))
            .for_each(|((p, g), b)| {
                for ((p, &g), b) in p.iter_mut().zip(g).zip(b) {
                    sgd_one(p, g, Some(b), s);
                }
            }),
        None => chunks.for_each(|(p, g)| {
            for (p, &g) in p.iter_mut().zip(g) {
                sgd_one(p, g, None, s);
            }
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
