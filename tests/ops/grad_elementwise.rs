//! Gradient checks of the elementwise ops over random shapes (ranks 1 to 3, dims 1 to 4):
//! every unary op, clamp, the scalar forms of the arithmetic operators, the binary ops under
//! random broadcast patterns, and where / masked_fill with broadcast masks.

use crate::grad::{
    broadcast_source, check, dims, distinct, same_rank, shaped, with_rank, with_ranks_le, wsum,
};
use proptest::prelude::*;
use rtx::op::UnaryOp;
use rtx::prelude::*;
use rtx::shape::rules::BroadcastShapes;

/// Unary op number `op` of the registry, of `t`; the ops with a restricted domain see `|t|`.
fn unary<S: Shape>(op: usize, t: &Tensor<S, f64>) -> Tensor<S, f64> {
    let op = UnaryOp::ALL[op];
    let x = match op.name() {
        "log" | "log1p" | "sqrt" | "rsqrt" => t.abs(),
        _ => t.clone(),
    };
    x.try_unary_op(op).unwrap()
}

/// `n` values with magnitudes in `[0.1 + 0.2k, 0.25 + 0.2k]` (k in 0..10) and random signs:
/// away from the kinks at 0 and from every [`bound`].
fn kink_free(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec((0u32..10, 0.0f64..0.15, any::<bool>()), n).prop_map(|v| {
        v.into_iter()
            .map(|(k, u, neg)| {
                let m = 0.1 + 0.2 * f64::from(k) + u;
                if neg { -m } else { m }
            })
            .collect()
    })
}

/// `0.075 + 0.2j`: in a gap of [`kink_free`]'s magnitudes, at least 0.025 from each.
fn bound(j: usize) -> f64 {
    0.075 + 0.2 * j as f64
}

fn kink_free_shaped() -> impl Strategy<Value = (Vec<usize>, Vec<f64>)> {
    dims(1..=3, 4).prop_flat_map(|d| {
        let n = d.iter().product::<usize>();
        (Just(d), kink_free(n))
    })
}

/// The gradients of both inputs of each binary op, at `a` and `b` of any broadcastable
/// shapes; `pow` and `/` see a positive base and divisor (through `exp`).
fn binary_case<A, B: Shape>(a: &Tensor<A, f64>, b: &Tensor<B, f64>)
where
    A: BroadcastShapes<B>,
{
    for op in 0..7 {
        let f = |x: &Tensor<A, f64>, y: &Tensor<B, f64>| match op {
            0 => wsum(&(x + y)),
            1 => wsum(&(x - y)),
            2 => wsum(&(x * y)),
            3 => wsum(&(x / y.exp())),
            4 => wsum(&x.maximum(y)),
            5 => wsum(&x.minimum(y)),
            _ => wsum(&x.exp().pow(&y.sin())),
        };
        check(a, |t| f(t, b));
        check(b, |t| f(a, t));
    }
}

/// Dims of `a`, dims of `b`, dims of a source with size-1 dims, and distinct values for all
/// three: `a` and `b` are the last dims of one output shape (the implicit, trailing-dims
/// rule), the source has the longer one's rank with some dims 1 (expanded explicitly).
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<f64>)> {
    let ones = prop::collection::vec(prop::bool::weighted(0.4), 3);
    (dims(1..=3, 4), 1usize..=3, 1usize..=3, ones).prop_flat_map(|(out, ra, rb, ones)| {
        let a = broadcast_source(&out, ra, &[false; 3]);
        let b = broadcast_source(&out, rb, &[false; 3]);
        let src = broadcast_source(&out, ra.max(rb), &ones);
        let n = [&a, &b, &src]
            .iter()
            .map(|d| d.iter().product::<usize>())
            .sum();
        (Just(a), Just(b), Just(src), distinct(n))
    })
}

proptest! {
    #[test]
    fn unary_ops((d, vals) in kink_free_shaped(), lo in 0usize..10, hi in 0usize..10) {
        with_rank!(d, s => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            for op in 0..UnaryOp::ALL.len() {
                check(&x, |t| wsum(&unary(op, t)));
            }
            check(&x, |t| wsum(&(t.abs().log() * t.abs().sqrt())));
            // Clamp with bounds between values: gradient 1 inside, 0 outside.
            let (lo, hi) = (-bound(lo), bound(hi));
            check(&x, |t| wsum(&t.clamp(lo.min(hi), hi)));
        });
    }

    #[test]
    fn scalar_ops((d, vals) in kink_free_shaped(), j in 0usize..10, neg in any::<bool>(), p in -2.0f64..2.0) {
        let c = if neg { -bound(j) } else { bound(j) };
        with_rank!(d, s => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            check(&x, |t| wsum(&(t + c)));
            check(&x, |t| wsum(&(c + t)));
            check(&x, |t| wsum(&(t - c)));
            check(&x, |t| wsum(&(c - t)));
            check(&x, |t| wsum(&(t * c)));
            check(&x, |t| wsum(&(c * t)));
            check(&x, |t| wsum(&(t / c)));
            check(&x, |t| wsum(&(c / t)));
            check(&x, |t| wsum(&-t));
            check(&x, |t| wsum(&t.abs().pow(p)));
            // The scalar sits between values, so there are no ties.
            check(&x, |t| wsum(&t.maximum(c)));
            check(&x, |t| wsum(&t.minimum(c)));
        });
    }

    #[test]
    fn binary_ops_with_broadcasting((da, db, dsrc, vals) in broadcast_pair()) {
        let (na, nb) = (da.iter().product::<usize>(), db.iter().product::<usize>());
        with_rank!(da, sa => with_rank!(db, sb => {
            let a = Tensor::from_vec(vals[..na].to_vec(), sa, Device::Cpu);
            let b = Tensor::from_vec(vals[na..na + nb].to_vec(), sb, Device::Cpu);
            binary_case(&a, &b);
        }));
        // Size-1 dims expanded explicitly, against a full operand of the output's shape.
        let out: Vec<usize> = if da.len() >= db.len() { da.clone() } else { db.clone() };
        with_rank!(out, so => {
            let src = Tensor::from_vec(vals[na + nb..].to_vec(), same_rank(so, &dsrc), Device::Cpu);
            let full = Tensor::from_vec(vals[..so.numel()].to_vec(), so, Device::Cpu);
            binary_case(&src.expand(so), &full);
            check(&src, |t| wsum(&t.expand(so).maximum(&full)));
            check(&src, |t| wsum(&(&full / t.broadcast_to(so).exp())));
        });
    }

    #[test]
    fn where_and_masked_fill_with_broadcast_masks(
        (d, vals) in shaped(1..=3, 4, -2.0, 2.0),
        mask_rank in 1usize..=3,
        bits in prop::collection::vec(any::<bool>(), 64),
        other_vals in prop::collection::vec(-2.0f64..2.0, 64),
    ) {
        // The mask and the other operand have the input's last dims (trailing-dims rule).
        let dm = broadcast_source(&d, mask_rank, &[false; 3]);
        with_ranks_le!(dm, d, sm, s => {
            let x = Tensor::from_vec(vals.clone(), s, Device::Cpu);
            let cond = Tensor::from_vec(bits[..sm.numel()].to_vec(), sm, Device::Cpu);
            let other = Tensor::from_vec(other_vals[..sm.numel()].to_vec(), sm, Device::Cpu);
            check(&x, |t| wsum(&t.where_cond(&cond, &other)));
            check(&other, |o| wsum(&x.where_cond(&cond, o)));
            check(&x, |t| wsum(&t.where_cond(&cond, 0.5)));
            check(&x, |t| wsum(&t.masked_fill(&cond, 3.0).exp()));
        });
    }
}
