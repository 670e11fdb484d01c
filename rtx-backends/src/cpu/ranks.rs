//! Reductions across ranks: the element-wise combination of every rank's buffer that
//! `rtx::dist`'s `all_reduce` and `reduce_scatter` compute, on raw bytes (here, in the CPU
//! backend, because rtx itself holds no loops over elements).
//!
//! Invariant: the ranks' contributions are combined in rank order, `((x0 ∘ x1) ∘ x2) ∘ ...`,
//! in one fixed accumulation type per element type, so a result is a pure function of the
//! inputs: every rank, every run and every world layout gets the same bits. f16 and bf16
//! accumulate in f32 and round once at the end; f32 and f64 in their own type; integers wrap
//! on overflow, as PyTorch's do.

use crate::{BackendError, Result};
use rtx_kernels::{DType, bf16, f16};

/// How a collective combines the ranks' values (`rtx::dist::ProcessGroup::all_reduce` and
/// `reduce_scatter`; PyTorch's `ReduceOp`).
///
/// ```
/// use rtx_backends::cpu::ranks::ReduceOp;
/// assert_eq!(ReduceOp::ALL.len(), 5);
/// assert_eq!(ReduceOp::Avg.name(), "avg");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum of the ranks' values.
    Sum,
    /// The sum divided by the world size (float element types only, as in PyTorch).
    Avg,
    /// The largest value (NaN if any rank has a NaN, as `torch.maximum`).
    Max,
    /// The smallest value (NaN if any rank has a NaN, as `torch.minimum`).
    Min,
    /// The product of the ranks' values.
    Product,
}

impl ReduceOp {
    /// Every reduction, for tests and loops.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Avg,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Product,
    ];

    /// The lower-case name, as in messages.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Avg => "avg",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Product => "product",
        }
    }
}

/// Whether `op` applies to elements of `dtype`: an error naming both if not, to be returned
/// before any rank sends anything.
pub fn check(what: &str, dtype: DType, op: ReduceOp) -> Result<()> {
    let why = match (dtype, op) {
        (DType::Bool, _) => "bool tensors cannot be reduced; cast them to an integer type",
        (d, ReduceOp::Avg) if !d.is_float() => {
            "Avg needs a float element type (an integer mean would truncate); use Sum and divide"
        }
        _ => return Ok(()),
    };
    Err(BackendError::BadArgument {
        op: "dist",
        msg: format!(
            "{what} of {} tensors with {}: {why}",
            dtype.name(),
            op.name()
        ),
    })
}

/// Reduces `parts`, one per rank in rank order, each `out.len()` bytes of `dtype` elements in
/// native byte order, into `out`. The caller has run [`check`] (a bool `dtype` panics).
pub fn reduce(parts: &[&[u8]], out: &mut [u8], dtype: DType, op: ReduceOp) {
    debug_assert!(parts.iter().all(|p| p.len() == out.len()));
    match dtype {
        DType::F32 => fold::<f32>(parts, out, op),
        DType::F64 => fold::<f64>(parts, out, op),
        DType::F16 => fold::<f16>(parts, out, op),
        DType::BF16 => fold::<bf16>(parts, out, op),
        DType::I32 => fold::<i32>(parts, out, op),
        DType::I64 => fold::<i64>(parts, out, op),
        DType::U8 => fold::<u8>(parts, out, op),
        DType::Bool => unreachable!("check() refuses bool reductions"),
    }
}

/// An element type as the reduction sees it: read from bytes into its accumulation type,
/// combined there, written back.
trait Lane {
    const SIZE: usize;
    type Acc: Copy;
    fn load(b: &[u8]) -> Self::Acc;
    fn store(v: Self::Acc, b: &mut [u8]);
    fn combine(a: Self::Acc, b: Self::Acc, op: ReduceOp) -> Self::Acc;
    /// The mean of `n` values summing to `sum` (floats only; [`check`] keeps integers out).
    fn mean(sum: Self::Acc, n: usize) -> Self::Acc;
}

/// Combines the parts rank by rank over the whole buffer (each part is read once, in order).
fn fold<L: Lane>(parts: &[&[u8]], out: &mut [u8], op: ReduceOp) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    let mut acc: Vec<L::Acc> = first.chunks_exact(L::SIZE).map(L::load).collect();
    for part in rest {
        for (a, b) in acc.iter_mut().zip(part.chunks_exact(L::SIZE)) {
            *a = L::combine(*a, L::load(b), op);
        }
    }
    for (a, o) in acc.into_iter().zip(out.chunks_exact_mut(L::SIZE)) {
        let a = if op == ReduceOp::Avg {
            L::mean(a, parts.len())
        } else {
            a
        };
        L::store(a, o);
    }
}

/// A float lane accumulated in `$acc`.
macro_rules! float_lane {
    ($t:ty, $acc:ty, $size:expr, $to:expr, $from:expr) => {
        impl Lane for $t {
            const SIZE: usize = $size;
            type Acc = $acc;
            fn load(b: &[u8]) -> $acc {
                let v = <$t>::from_ne_bytes(b.try_into().expect("a whole element"));
                $to(v)
            }
            fn store(v: $acc, b: &mut [u8]) {
                let v: $t = $from(v);
                b.copy_from_slice(&v.to_ne_bytes());
            }
            fn combine(a: $acc, b: $acc, op: ReduceOp) -> $acc {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Product => a * b,
                    _ if a.is_nan() || b.is_nan() => <$acc>::NAN,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            fn mean(sum: $acc, n: usize) -> $acc {
                sum / n as $acc
            }
        }
    };
}

float_lane!(f32, f32, 4, |v| v, |v| v);
float_lane!(f64, f64, 8, |v| v, |v| v);
float_lane!(f16, f32, 2, f16::to_f32, f16::from_f32);
float_lane!(bf16, f32, 2, bf16::to_f32, bf16::from_f32);

/// An integer lane, wrapping on overflow.
macro_rules! int_lane {
    ($t:ty, $size:expr) => {
        impl Lane for $t {
            const SIZE: usize = $size;
            type Acc = $t;
            fn load(b: &[u8]) -> $t {
                <$t>::from_ne_bytes(b.try_into().expect("a whole element"))
            }
            fn store(v: $t, b: &mut [u8]) {
                b.copy_from_slice(&v.to_ne_bytes());
            }
            fn combine(a: $t, b: $t, op: ReduceOp) -> $t {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                    ReduceOp::Product => a.wrapping_mul(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            fn mean(sum: $t, _: usize) -> $t {
                sum
            }
        }
    };
}

int_lane!(i32, 4);
int_lane!(i64, 8);
int_lane!(u8, 1);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{bytes_of, vec_from_bytes};

    fn run<T: rtx_kernels::Element>(parts: &[Vec<T>], op: ReduceOp) -> Vec<T> {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| bytes_of(p)).collect();
        let mut out = vec![0u8; bytes[0].len()];
        check("test", T::DTYPE, op).unwrap();
        reduce(&bytes, &mut out, T::DTYPE, op);
        vec_from_bytes("test", &out).unwrap()
    }

    #[test]
    fn floats_combine_in_rank_order() {
        // 1e8 + 1 - 1e8 in f32 is 0 left to right, 1 in another order.
        let parts = [vec![1e8f32], vec![1.0], vec![-1e8]];
        assert_eq!(run(&parts, ReduceOp::Sum), [0.0]);
        assert_eq!(
            run(&[vec![1.0f64, 2.0], vec![3.0, -4.0]], ReduceOp::Avg),
            [2.0, -1.0]
        );
        assert_eq!(
            run(&[vec![2.0f32, 5.0], vec![3.0, -1.0]], ReduceOp::Product),
            [6.0, -5.0]
        );
        let nan = run(&[vec![f32::NAN, 1.0], vec![0.0, 2.0]], ReduceOp::Max);
        assert!(nan[0].is_nan() && nan[1] == 2.0);
        assert_eq!(run(&[vec![-1.0f32], vec![-3.0]], ReduceOp::Min), [-3.0]);
    }

    #[test]
    fn half_types_accumulate_in_f32_and_round_once() {
        // 2048 + 1 + 1 in f16: each step rounds back to 2048, but in f32 it is 2050.
        let p = |x: f32| vec![f16::from_f32(x)];
        assert_eq!(run(&[p(2048.0), p(1.0), p(1.0)], ReduceOp::Sum), p(2050.0));
        let b = |x: f32| vec![bf16::from_f32(x)];
        assert_eq!(run(&[b(3.0), b(5.0)], ReduceOp::Avg), b(4.0));
    }

    #[test]
    fn integers_wrap_and_refuse_avg() {
        assert_eq!(run(&[vec![i32::MAX], vec![1]], ReduceOp::Sum), [i32::MIN]);
        assert_eq!(run(&[vec![7i64, -2], vec![3, 9]], ReduceOp::Max), [7, 9]);
        assert_eq!(run(&[vec![200u8], vec![100]], ReduceOp::Sum), [44]);
        let e = check("all_reduce", DType::I64, ReduceOp::Avg).unwrap_err();
        assert!(e.to_string().contains("int64 tensors with avg"), "{e}");
        assert!(check("all_reduce", DType::Bool, ReduceOp::Max).is_err());
    }
}
