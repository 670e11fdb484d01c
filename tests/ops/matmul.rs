//! Matrix products against a naive float64 reference: every rank pair, transposed and other
//! strided views, broadcast batches, and f32, f64, f16, bf16 and i32.

use crate::common::{assert_close, rounded, to_f64, tolerance};
use proptest::prelude::*;
use rtx::prelude::*;

/// Deterministic test values from a seed: quarter steps in [-2, 2] (small integers for
/// integer types), so integer products are exact.
fn values(seed: u64, n: usize) -> Vec<f64> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 33) % 17) as f64 / 4.0 - 2.0
        })
        .collect()
}

/// A tensor of the given shape holding `values(seed)` rounded to `E` (integers truncate).
fn tensor<S: Shape, E: Num>(seed: u64, shape: S) -> Tensor<S, E> {
    let v: Vec<E> = values(seed, shape.numel())
        .into_iter()
        .map(|x| E::from_f64(x))
        .collect();
    Tensor::from_vec(v, shape, Device::Cpu)
}

/// `out[b] = a[b] · b[b]` for dense row-major stacks; a batch stride of 0 broadcasts.
fn naive(
    a: &[f64],
    b: &[f64],
    batch: usize,
    (m, k, n): (usize, usize, usize),
    broadcast: (bool, bool),
) -> (Vec<f64>, Vec<f64>) {
    let (sa, sb) = (
        if broadcast.0 { 0 } else { m * k },
        if broadcast.1 { 0 } else { k * n },
    );
    let (mut out, mut mag) = (vec![0.0; batch * m * n], vec![0.0; batch * m * n]);
    for t in 0..batch {
        for i in 0..m {
            for j in 0..n {
                for p in 0..k {
                    let x = a[t * sa + i * k + p] * b[t * sb + p * n + j];
                    out[(t * m + i) * n + j] += x;
                    mag[(t * m + i) * n + j] += x.abs();
                }
            }
        }
    }
    (out, mag)
}

/// Compares a product with the reference, allowing rounding proportional to the size of the
/// terms summed (f32 accumulates error with k; f16 and bf16 round the output).
#[track_caller]
fn check<S: Shape, E: Num>(got: &Tensor<S, E>, (want, mag): (Vec<f64>, Vec<f64>)) {
    let (atol, rtol) = tolerance(E::DTYPE);
    let scale = mag.iter().cloned().fold(1.0, f64::max);
    let want = if E::DTYPE.is_float() {
        want
    } else {
        rounded::<E>(&want)
    };
    assert_close(&to_f64(got), &want, atol * scale, rtol);
}

/// Runs every case for one element type.
fn all_cases<E: Num>((b, m, k, n): (usize, usize, usize, usize), seed: u64) {
    // [M, K] x [K, N], contiguous.
    let a: Tensor<(usize, usize), E> = tensor(seed, (m, k));
    let w: Tensor<(usize, usize), E> = tensor(seed + 1, (k, n));
    check(
        &a.matmul(&w),
        naive(&to_f64(&a), &to_f64(&w), 1, (m, k, n), (false, false)),
    );

    // Both transposed: column-unit strides read in place.
    let at: Tensor<(usize, usize), E> = tensor(seed + 2, (k, m));
    let wt: Tensor<(usize, usize), E> = tensor(seed + 3, (n, k));
    let (a2, w2) = (at.t(), wt.t());
    check(
        &a2.matmul(&w2),
        naive(&to_f64(&a2), &to_f64(&w2), 1, (m, k, n), (false, false)),
    );

    // Neither stride is 1: every other element of a permuted tensor.
    let wide: Tensor<(usize, usize, Const<2>), E> = tensor(seed + 4, (k, m, Const));
    let a3: Tensor<(usize, usize), E> = wide
        .permute::<Axes3<1, 0, 2>>()
        .narrow::<2, _>(1, Const::<1>)
        .squeeze::<2>();
    assert_eq!(a3.strides(), &[2, 2 * m]);
    check(
        &a3.matmul(&w),
        naive(&to_f64(&a3), &to_f64(&w), 1, (m, k, n), (false, false)),
    );

    // A row repeated with stride 0.
    let row: Tensor<(Const<1>, usize), E> = tensor(seed + 5, (Const, k));
    let a4: Tensor<(usize, usize), E> = row.broadcast_to((m, k));
    check(
        &a4.matmul(&w),
        naive(&to_f64(&a4), &to_f64(&w), 1, (m, k, n), (false, false)),
    );

    // Vectors: [K] x [K, N] and [M, K] x [K].
    let v: Tensor<(usize,), E> = tensor(seed + 6, (k,));
    check(
        &v.matmul(&w),
        naive(&to_f64(&v), &to_f64(&w), 1, (1, k, n), (false, false)),
    );
    let u: Tensor<(usize,), E> = tensor(seed + 7, (n,));
    check(
        &w.matmul(&u),
        naive(&to_f64(&w), &to_f64(&u), 1, (k, n, 1), (false, false)),
    );

    // Batched, with the right side transposed per matrix.
    let x: Tensor<(usize, usize, usize), E> = tensor(seed + 8, (b, m, k));
    let yt: Tensor<(usize, usize, usize), E> = tensor(seed + 9, (b, n, k));
    let y = yt.transpose::<1, 2>();
    check(
        &x.matmul(&y),
        naive(&to_f64(&x), &to_f64(&y), b, (m, k, n), (false, false)),
    );

    // Broadcast batches on either side.
    check(
        &x.matmul(&w),
        naive(&to_f64(&x), &to_f64(&w), b, (m, k, n), (false, true)),
    );
    check(
        &a.matmul(&y),
        naive(&to_f64(&a), &to_f64(&y), b, (m, k, n), (true, false)),
    );
    // A stack whose rows are not evenly spaced across the batch (a permuted [M, B, K]) cannot
    // run as one taller product; a dense one can (above), and both match the reference.
    let xp: Tensor<(usize, usize, usize), E> =
        tensor::<_, E>(seed + 12, (m, b, k)).permute::<Axes3<1, 0, 2>>();
    check(
        &xp.matmul(&w),
        naive(&to_f64(&xp), &to_f64(&w), b, (m, k, n), (false, true)),
    );

    // Rank 4: [B1, B2, M, K] x [B1, B2, K, N] and x [K, N].
    let x4: Tensor<(usize, Const<2>, usize, usize), E> = tensor(seed + 10, (b, Const, m, k));
    let y4: Tensor<(usize, Const<2>, usize, usize), E> = tensor(seed + 11, (b, Const, k, n));
    check(
        &x4.matmul(&y4),
        naive(&to_f64(&x4), &to_f64(&y4), 2 * b, (m, k, n), (false, false)),
    );
    check(
        &x4.matmul(&w),
        naive(&to_f64(&x4), &to_f64(&w), 2 * b, (m, k, n), (false, true)),
    );
    check(
        &a.matmul(&y4),
        naive(&to_f64(&a), &to_f64(&y4), 2 * b, (m, k, n), (true, false)),
    );
}

proptest! {
    #[test]
    fn matmul_matches_a_float64_reference(
        b in 1usize..4, m in 1usize..7, k in 1usize..7, n in 1usize..7, seed in any::<u64>()
    ) {
        all_cases::<f32>((b, m, k, n), seed);
        all_cases::<f64>((b, m, k, n), seed);
        all_cases::<f16>((b, m, k, n), seed);
        all_cases::<bf16>((b, m, k, n), seed);
        all_cases::<i32>((b, m, k, n), seed);
    }

    #[test]
    fn large_matmul_matches_a_float64_reference(
        m in 1usize..90, k in 1usize..90, n in 1usize..90, seed in any::<u64>()
    ) {
        // Sizes where gemm packs and blocks, and batches split across threads.
        let a: Tensor<(Const<3>, usize, usize)> = tensor(seed, (Const, m, k));
        let w: Tensor<(usize, usize)> = tensor(seed + 1, (n, k));
        let wt = w.t();
        check(&a.matmul(&wt), naive(&to_f64(&a), &to_f64(&wt), 3, (m, k, n), (false, true)));
        let a16 = a.cast::<f16>();
        let w16 = wt.cast::<f16>();
        check(&a16.matmul(&w16), naive(&to_f64(&a16), &to_f64(&w16), 3, (m, k, n), (false, true)));
    }
}

#[test]
fn static_shapes_and_named_batches() {
    let a: Tensor<Rank2<2, 3>, i32> = Tensor::from_array([[1, 2, 3], [4, 5, 6]], Device::Cpu);
    let b: Tensor<Rank2<3, 2>, i32> = Tensor::from_array([[1, 0], [0, 1], [1, 1]], Device::Cpu);
    let c: Tensor<Rank2<2, 2>, i32> = a.matmul(&b);
    assert_eq!(c.to_vec(), vec![4, 5, 10, 11]);
    let x: Tensor<(Dyn<'B'>, Const<2>, Const<3>), u8> =
        Tensor::ones((Dyn(3), Const, Const), Device::Cpu);
    let y: Tensor<(Dyn<'B'>, Const<2>, Const<2>), u8> = x.matmul(&b.cast::<u8>());
    assert_eq!(y.to_vec(), vec![2; 12]);
}

#[test]
fn empty_inner_dim_gives_zeros() {
    let a: Tensor<(usize, usize)> = Tensor::ones((2, 0), Device::Cpu);
    let b: Tensor<(usize, usize)> = Tensor::ones((0, 3), Device::Cpu);
    assert_eq!(a.matmul(&b).to_vec(), vec![0.0; 6]);
    let e: Tensor<(usize, usize)> = Tensor::ones((0, 3), Device::Cpu);
    assert_eq!(e.matmul(&b.t()).dims(), &[0, 0]);
}

#[test]
fn run_time_mismatches_name_both_shapes() {
    let a: Tensor<(Dyn<'B'>, usize, Const<4>)> = Tensor::zeros((Dyn(2), 3, Const), Device::Cpu);
    let b: Tensor<(usize, Const<4>, Const<5>)> = Tensor::zeros((3, Const, Const), Device::Cpu);
    assert_eq!(
        a.try_matmul(&b).err().unwrap().to_string(),
        "matmul: shape mismatch: [B=2, 3, 4] vs [3, 4, 5]: the batch dimensions of a batched matmul must agree"
    );
    let v: Tensor<(usize,)> = Tensor::zeros((5,), Device::Cpu);
    let m: Tensor<(usize, usize)> = Tensor::zeros((4, 2), Device::Cpu);
    assert_eq!(
        v.try_matmul(&m).err().unwrap().to_string(),
        "matmul: shape mismatch: [5] vs [4, 2]: the inner dimensions of a matmul must agree"
    );
}

#[test]
#[should_panic(
    expected = "matmul: shape mismatch: [2, 3] vs [2, 3]: the inner dimensions of a matmul must agree"
)]
fn plain_matmul_panics_with_the_message() {
    let a: Tensor<(usize, usize)> = Tensor::zeros((2, 3), Device::Cpu);
    let _ = a.matmul(&a);
}

#[test]
fn results_are_bitwise_reproducible() {
    let a: Tensor<(usize, usize)> = tensor(7, (150, 200));
    let b: Tensor<(usize, usize)> = tensor(8, (120, 200));
    let first = a.matmul(&b.t()).to_vec();
    for _ in 0..3 {
        let again = a.matmul(&b.t()).to_vec();
        assert!(
            first
                .iter()
                .zip(&again)
                .all(|(x, y)| x.to_bits() == y.to_bits())
        );
    }
}
