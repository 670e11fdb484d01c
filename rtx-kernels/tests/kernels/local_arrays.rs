//! Per-thread local arrays in `#[kernel]` SIMT kernels: natively they are Rust arrays (read,
//! written, compound-assigned at constant and computed indices, bounds-checked), and in CUDA
//! plain local arrays filled and walked by unrolled loops.

use rtx_kernels::Float;
use rtx_kernels::kernel::LaunchConfig;
use rtx_macros::kernel;

/// Each thread takes `W` consecutive values, turns them into prefix sums in a local array and
/// writes them back reversed; `flags` marks which of them are negative, through a local
/// array of `bool`, and `wide` accumulates the same sums in `f64` for `total`.
#[kernel(crate = rtx_kernels)]
fn prefix_reversed<T: Float>(x: &[T], out: &mut [T], total: &mut [T], neg: &mut [u32], n: usize) {
    const W: usize = 4;
    let base = (block_idx_x() * block_dim_x() + thread_idx_x()) * W;
    if base + W <= n {
        let mut v = [0.0; W];
        let mut flags: [bool; 4] = [false; 4];
        let mut wide = [0.0 as f64; W];
        for k in 0..W {
            v[k] = x[base + k];
            flags[k] = v[k] < 0.0;
        }
        wide[0] = x[base] as f64;
        for k in 1..W {
            v[k] += v[k - 1];
            wide[k] = wide[k - 1] + (x[base + k] as f64);
        }
        // A computed index, not a loop constant.
        let mut j = 0;
        while j < W {
            out[base + j] = v[W - 1 - j];
            j += 1;
        }
        let mut count: u32 = 0;
        for k in 0..W {
            if flags[k] {
                count += 1;
            }
        }
        neg[base / W] = count;
        total[base / W] = wide[W - 1] as T;
    }
}

/// Reads `v[at]` of a local array of 4: out of bounds for `at >= 4`.
#[kernel(crate = rtx_kernels)]
fn read_local<T: Float>(out: &mut [T], at: usize) {
    let v = [1.0; 4];
    out[0] = v[at];
}

#[test]
fn local_arrays_hold_per_thread_values() {
    let n = 4 * 2 * 32;
    let x: Vec<f64> = (0..n).map(|i| ((i * 37 % 11) as f64) - 5.0).collect();
    let mut out = vec![0.0f64; n];
    let mut total = vec![0.0f64; n / 4];
    let mut neg = vec![0u32; n / 4];
    prefix_reversed(
        LaunchConfig::new(2, 32),
        &x,
        &mut out,
        &mut total,
        &mut neg,
        n,
    )
    .unwrap();
    for (t, chunk) in x.chunks(4).enumerate() {
        let mut sums = chunk.to_vec();
        for k in 1..4 {
            sums[k] += sums[k - 1];
        }
        assert_eq!(total[t], sums[3], "thread {t}");
        sums.reverse();
        assert_eq!(&out[4 * t..4 * t + 4], &sums[..], "thread {t}");
        let count = chunk.iter().filter(|v| **v < 0.0).count() as u32;
        assert_eq!(neg[t], count, "thread {t}");
    }
}

#[test]
fn local_arrays_are_bounds_checked_natively() {
    let mut out = vec![0.0f32; 1];
    read_local(LaunchConfig::new(1, 1), &mut out, 3).unwrap();
    assert_eq!(out[0], 1.0);
    let caught = std::panic::catch_unwind(|| {
        let mut out = vec![0.0f32; 1];
        let _ = read_local(LaunchConfig::new(1, 1), &mut out, 4);
    });
    assert!(caught.is_err(), "v[4] of a [T; 4] must panic natively");
}

#[test]
fn local_arrays_become_unrolled_cuda_arrays() {
    let src = prefix_reversed::KERNEL.source;
    assert!(src.contains("A v[4];"), "{src}");
    assert!(src.contains("bool flags[4];"), "{src}");
    assert!(src.contains("double wide[4];"), "{src}");
    // Three constant loops over the array and three initializations, each unrolled.
    assert_eq!(src.matches("#pragma unroll").count(), 6, "{src}");
    assert!(src.contains("k < 4ull"), "{src}");
}
