//! The native side of the fused cross-entropy kernels and the dropout kernel against
//! independent references: cross entropy written out in f64 per row (log-softmax, picked
//! target, smoothing mean), its gradient checked by central finite differences of that
//! reference, and dropout masks against `Philox::bernoulli` word by word.

use rtx_kernels::kernel::LaunchConfig;
use rtx_kernels::kernels::*;
use rtx_kernels::{Float, FloatMath, Philox, bf16, f16};

/// Deterministic test values in [lo, hi).
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

/// The mean cross entropy in f64, straight from the definition; `None` targets are ignored.
fn reference(x: &[f64], targets: &[Option<usize>], cols: usize, s: f64) -> f64 {
    let (mut total, mut kept) = (0.0, 0usize);
    for (r, t) in targets.iter().enumerate() {
        let Some(t) = *t else { continue };
        let row = &x[r * cols..][..cols];
        let lse = row.iter().map(|v| v.exp()).sum::<f64>().ln();
        let nll = lse - row[t];
        let smooth = row.iter().map(|v| lse - v).sum::<f64>() / cols as f64;
        total += (1.0 - s) * nll + s * smooth;
        kept += 1;
    }
    total / kept as f64
}

/// Forward (rows, then mean) and backward through the native kernels, in `T`.
#[allow(clippy::type_complexity)]
fn fused<T: Float>(
    x: &[f64],
    targets: &[i64],
    cols: usize,
    ignore: Option<i64>,
    s: f64,
    block: u32,
) -> (f64, f64, Vec<i64>, Vec<f64>) {
    let rows = targets.len();
    let xt: Vec<T> = x.iter().map(|&v| T::from_f64(v)).collect();
    let zero = <T::Acc as FloatMath>::c(0.0);
    let (mut loss, mut lse) = (vec![zero; rows], vec![zero; rows]);
    let (ign, has) = (ignore.unwrap_or(0), ignore.is_some() as u32);
    let st = T::from_f64(s);
    let rows_launch = LaunchConfig::new(rows as u32, block);
    cross_entropy_rows(
        rows_launch,
        &xt,
        targets,
        &mut loss,
        &mut lse,
        cols,
        ign,
        has,
        st,
    )
    .unwrap();
    let (mut out, mut kept, mut bad) = (vec![T::from_f64(0.0)], vec![zero], vec![0i64; 2]);
    let one = LaunchConfig::new(1, 256);
    cross_entropy_mean(
        one, &loss, targets, &mut out, &mut kept, &mut bad, rows, cols, ign, has,
    )
    .unwrap();
    let mut dx = vec![T::from_f64(0.0); x.len()];
    let g = [T::from_f64(1.0)];
    cross_entropy_backward_rows(
        rows_launch,
        &xt,
        targets,
        &lse,
        &g,
        &kept,
        &mut dx,
        cols,
        ign,
        has,
        st,
    )
    .unwrap();
    (
        out[0].to_f64(),
        FloatMath::to_f64(kept[0]),
        bad,
        dx.iter().map(|v| v.to_f64()).collect(),
    )
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs().max(1.0),
        "{what}: got {got}, want {want}"
    );
}

#[test]
fn cross_entropy_matches_the_definition_and_its_finite_differences() {
    // 37 columns: not a multiple of 32, so the last warp of a row is partly idle; 7 rows with
    // two ignored.
    let (rows, cols) = (7usize, 37usize);
    let x = values(rows * cols, 1, -4.0, 4.0);
    let targets = [3i64, -100, 36, 0, 17, -100, 5];
    let kept: Vec<Option<usize>> = targets
        .iter()
        .map(|&t| (t != -100).then_some(t as usize))
        .collect();
    for s in [0.0, 0.1, 1.0] {
        for block in [32, 64, 256] {
            let (loss, k, bad, dx) = fused::<f64>(&x, &targets, cols, Some(-100), s, block);
            let what = format!("s = {s}, block {block}");
            close(
                loss,
                reference(&x, &kept, cols, s),
                1e-12,
                &format!("loss, {what}"),
            );
            assert_eq!((k, bad.as_slice()), (5.0, &[-1i64, 0][..]), "{what}");
            let h = 1e-6;
            for i in 0..x.len() {
                let mut p = x.clone();
                p[i] += h;
                let up = reference(&p, &kept, cols, s);
                p[i] -= 2.0 * h;
                let down = reference(&p, &kept, cols, s);
                close(
                    dx[i],
                    (up - down) / (2.0 * h),
                    1e-6,
                    &format!("dx[{i}], {what}"),
                );
            }
        }
    }
}

#[test]
fn cross_entropy_in_narrow_types_rounds_once() {
    let (rows, cols) = (5usize, 70usize);
    let x = values(rows * cols, 2, -3.0, 3.0);
    let targets = [69i64, 0, 33, 1, 2];
    let kept: Vec<Option<usize>> = targets.iter().map(|&t| Some(t as usize)).collect();
    // The reference sees the same rounded inputs the kernel does.
    let rounded = |f: fn(f64) -> f64| x.iter().map(|&v| f(v)).collect::<Vec<_>>();
    let x32 = rounded(|v| v as f32 as f64);
    let x16 = rounded(|v| f16::from_f64(v).to_f64());
    let xb16 = rounded(|v| bf16::from_f64(v).to_f64());
    let (l32, ..) = fused::<f32>(&x32, &targets, cols, None, 0.2, 64);
    close(l32, reference(&x32, &kept, cols, 0.2), 1e-6, "f32");
    let (l16, ..) = fused::<f16>(&x16, &targets, cols, None, 0.2, 64);
    let s16 = f16::from_f64(0.2).to_f64();
    close(l16, reference(&x16, &kept, cols, s16), 1e-3, "f16");
    let (lb, ..) = fused::<bf16>(&xb16, &targets, cols, None, 0.2, 64);
    let sb = bf16::from_f64(0.2).to_f64();
    close(lb, reference(&xb16, &kept, cols, sb), 8e-3, "bf16");
}

#[test]
fn cross_entropy_reports_the_first_bad_target_and_nan_when_all_are_ignored() {
    let cols = 3;
    let x = values(6 * cols, 3, -1.0, 1.0);
    // Rows 2 and 4 are out of range; row 2 is the first. 300 rows spread the bad ones over
    // several threads of the mean's block.
    let (_, k, bad, _) = fused::<f32>(&x, &[0, 1, 3, -100, -1, 2], cols, Some(-100), 0.0, 32);
    assert_eq!((k, bad), (3.0, vec![2, 3]));
    let mut many = vec![0i64; 300];
    many[299] = 9;
    many[258] = -5;
    let xs = values(300 * cols, 4, -1.0, 1.0);
    let (_, k, bad, _) = fused::<f32>(&xs, &many, cols, None, 0.0, 32);
    assert_eq!((k, bad), (298.0, vec![258, -5]));
    let (loss, k, bad, dx) = fused::<f64>(&x[..2 * cols], &[7, 7], cols, Some(7), 0.1, 32);
    assert!(
        loss.is_nan() && k == 0.0 && bad == vec![-1, 0],
        "{loss} {k} {bad:?}"
    );
    assert!(dx.iter().all(|&d| d == 0.0), "{dx:?}");
}

#[test]
fn dropout_masks_are_the_bernoulli_stream() {
    let n = 1001;
    let x = values(n, 5, -2.0, 2.0);
    for (p, seed) in [(0.1, 1u64), (0.5, 2), (0.9, 1 << 40)] {
        let t = Philox::bernoulli_threshold(1.0 - p);
        let g = Philox::new(seed);
        let scale = 1.0 / (1.0 - p);
        let mut out = vec![0.0f64; n];
        // A small grid: most threads take several Philox blocks.
        random_dropout(LaunchConfig::new(2, 32), &x, &mut out, n, seed, t, scale).unwrap();
        let x16: Vec<f16> = x.iter().map(|&v| f16::from_f64(v)).collect();
        let mut o16 = vec![f16::from_f64(0.0); n];
        let s16 = f16::from_f64(scale);
        random_dropout(LaunchConfig::new(3, 64), &x16, &mut o16, n, seed, t, s16).unwrap();
        let mut dropped = 0;
        for i in 0..n {
            let keep = g.bernoulli(i as u64, t);
            dropped += !keep as usize;
            let k = if keep { 1.0 } else { 0.0 };
            assert_eq!(out[i].to_bits(), (x[i] * k * scale).to_bits(), "f64 {i}");
            let want = f16::from_f32((x16[i].to_f32() * k as f32) * s16.to_f32());
            assert_eq!(o16[i].to_bits(), want.to_bits(), "f16 {i}");
        }
        let rate = dropped as f64 / n as f64;
        assert!((rate - p).abs() < 0.06, "p = {p}: dropped {rate}");
    }
}
