//! Users' own `#[kernel]`s through `rtx::kernel` on every device: an elementwise kernel with
//! uniforms on contiguous, strided and broadcast inputs and its gradients through the derived
//! kernels, a reduce kernel along each axis, and SIMT kernels (a tiled transpose with shared
//! memory, an in-place update, a sum finished by the last block to take a ticket with
//! `atomic_add` after a `thread_fence`, values passed between blocks across `grid_sync`), each
//! GPU held to the CPU's native run.

use super::*;
use rtx::kernel::{self, Arg, LaunchConfig};

#[rtx::kernel(elementwise)]
fn gelu_affine<T: Float>(x: T, #[uniform] a: T, #[uniform] b: T) -> T {
    let z = a * x + b;
    let inner = 0.7978845608028654 * (z + 0.044715 * z * z * z);
    0.5 * z * (1.0 + inner.tanh())
}

#[rtx::kernel(elementwise)]
fn mix<T: Float>(x: T, y: T, #[uniform] w: T) -> T {
    w * x * x + (1.0 - w) * y.exp()
}

#[rtx::kernel(elementwise)]
fn pow_loop<T: Float>(x: T, #[uniform] n: usize) -> T {
    let mut acc = 1.0;
    for _i in 0..n {
        acc *= x;
    }
    acc
}

#[rtx::kernel(reduce(identity = 0.0, map = |x| x.abs()))]
fn l1<T: Float>(acc: T, x: T) -> T {
    acc + x
}

/// A 32 x 32 tiled transpose through shared memory; blocks of 32 x 8 threads.
#[rtx::kernel]
fn transpose<T: Float>(x: &[T], out: &mut [T], rows: usize, cols: usize) {
    #[shared]
    let tile: [T; 1056];
    let col0 = block_idx_x() * 32;
    let row0 = block_idx_y() * 32;
    let tx = thread_idx_x();
    let ty = thread_idx_y();
    for k in (0..32).step_by(8) {
        let r = row0 + ty + k;
        let c = col0 + tx;
        if r < rows && c < cols {
            tile[(ty + k) * 33 + tx] = x[r * cols + c];
        }
    }
    sync_threads();
    for k in (0..32).step_by(8) {
        let r = col0 + ty + k;
        let c = row0 + tx;
        if r < cols && c < rows {
            out[r * rows + c] = tile[tx * 33 + ty + k];
        }
    }
}

/// `out[i] = a * x[i] + out[i]` for `i < n`.
#[rtx::kernel]
fn axpy_into<T: Float>(a: T, x: &[T], out: &mut [T], n: usize) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        out[i] = a * x[i] + out[i];
    }
}

/// Each block of 32 threads sums its 32 values into `parts`; the last block to finish (the
/// one whose ticket is the grid's size less one) adds the parts in block order into `out[0]`
/// and hands the ticket back at 0, so the next launch finds it as this one did.
#[rtx::kernel]
fn sum_in_the_last_block<T: Float>(x: &[T], parts: &mut [T], ticket: &mut [T], out: &mut [T]) {
    #[shared]
    let last: [T; 1];
    let b = block_idx_x();
    let t = thread_idx_x();
    let mut v = x[b * 32 + t];
    let mut mask: u32 = 16;
    while mask > 0 {
        v += warp_shuffle_xor(v, mask);
        mask /= 2;
    }
    if t == 0 {
        parts[b] = v;
        // The part is visible to every block before the ticket is taken.
        thread_fence();
        let old = atomic_add(&mut ticket[0], 1.0);
        last[0] = 0.0;
        if old == (grid_dim_x() - 1) as T {
            last[0] = 1.0;
        }
    }
    sync_threads();
    if t == 0 && last[0] == 1.0 {
        thread_fence();
        let mut total = 0.0;
        for i in 0..grid_dim_x() {
            total += parts[i];
        }
        out[0] = total;
        ticket[0] = 0.0;
    }
}

/// `rounds` times over: every thread doubles the value of the thread `block_dim_x()` ahead of
/// it (mod the grid's threads), which another block holds: `a[i]` ends as `x[(i + rounds
/// block_dim_x()) % n] * 2^rounds`. Each read waits for every block's write at `grid_sync`; a
/// grid that ran its blocks one after another would read values of the round before.
// ANCHOR: grid_sync
#[rtx::kernel]
fn pass_along_the_grid<T: Float>(x: &[T], a: &mut [T], b: &mut [T], rounds: usize) {
    let n = grid_dim_x() * block_dim_x();
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    a[i] = x[i];
    let mut r = 0;
    while r < rounds {
        grid_sync();
        b[i] = 2.0 * a[(i + block_dim_x()) % n];
        grid_sync();
        a[i] = b[i];
        r += 1;
    }
}
// ANCHOR_END: grid_sync

/// `out[i] = words[2 i] - words[2 i + 1]` (as `T`): a `&[i32]` parameter, as a kernel
/// decoding packed data takes one.
#[rtx::kernel]
fn word_differences<T: Float>(words: &[i32], out: &mut [T], n: usize) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        out[i] = (words[2 * i] - words[2 * i + 1]) as T;
    }
}

fn elementwise_case<E: Float>() {
    on_every_device::<E>("user elementwise kernels", |dev| {
        let x: Tensor<(usize, usize), E> =
            Tensor::from_vec(values(37 * 45, 1, -2.0, 2.0), (37, 45), dev);
        let row: Tensor<(usize,), E> = Tensor::from_vec(values(45, 2, -1.0, 1.0), (45,), dev);
        let xg = x.clone().requires_grad();
        let rg = row.clone().requires_grad();
        let y = kernel::map2(mix::Op, &xg, &rg, &[0.25]).map(gelu_affine::Op, &[1.5, -0.25]);
        let grads = y.sum_all().backward();
        let mut out: Outputs = vec![
            (
                "contiguous".into(),
                f64s(&x.map(gelu_affine::Op, &[1.5, -0.25])),
            ),
            (
                "transposed".into(),
                f64s(&x.t().map(gelu_affine::Op, &[0.5, 0.125])),
            ),
            ("broadcast pair".into(), f64s(&y)),
            ("integer uniform".into(), f64s(&x.map(pow_loop::Op, &[3.0]))),
        ];
        // Gradients chain two derived kernels and sum over broadcast rows: in f16 and bf16 a
        // rounding flipped by the GPU's math is summed 37 times, past the tolerance, so they
        // are compared in f32 and f64.
        if matches!(E::DTYPE, DType::F32 | DType::F64) {
            let dx = grads.get(&xg).map(|t| f64s(&t)).unwrap_or_default();
            let drow = grads.get(&rg).map(|t| f64s(&t)).unwrap_or_default();
            assert!(!dx.is_empty() && !drow.is_empty(), "gradients on {dev}");
            out.push(("d/dx".into(), dx));
            out.push(("d/drow".into(), drow));
        }
        out
    });
}

#[test]
fn user_elementwise_kernels_match_the_cpu() {
    every_float!(elementwise_case);
}

fn reduce_case<E: Float>() {
    on_every_device::<E>("user reduce kernel", |dev| {
        let x: Tensor<(usize, usize, usize), E> =
            Tensor::from_vec(values(6 * 70 * 9, 3, -1.0, 1.0), (6, 70, 9), dev);
        vec![
            ("axis 0".into(), f64s(&x.reduce_with::<0>(l1::Op))),
            ("axis 1".into(), f64s(&x.reduce_with::<1>(l1::Op))),
            ("axis 2".into(), f64s(&x.reduce_with::<2>(l1::Op))),
            (
                "permuted view".into(),
                f64s(&x.permute::<Axes3<2, 0, 1>>().reduce_with::<2>(l1::Op)),
            ),
        ]
    });
}

#[test]
fn user_reduce_kernels_match_the_cpu() {
    every_float!(reduce_case);
}

fn simt_case<E: Float>() {
    on_every_device::<E>("user SIMT kernels", |dev| {
        let (rows, cols) = (70usize, 45usize);
        let m: Tensor<(usize, usize), E> =
            Tensor::from_vec(values(rows * cols, 4, -2.0, 2.0), (rows, cols), dev);
        let mut t: Tensor<(usize, usize), E> = Tensor::zeros((cols, rows), dev);
        let tiles = ((cols as u32).div_ceil(32), (rows as u32).div_ceil(32));
        // SAFETY: the kernel checks every index against `rows` and `cols`, the tensors' sizes.
        unsafe {
            kernel::launch(
                transpose::Op,
                LaunchConfig::new(tiles, (32, 8)),
                &mut [
                    Arg::input(&m),
                    Arg::output(&mut t),
                    Arg::usize(rows),
                    Arg::usize(cols),
                ],
            )
        }
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f64s(&t), f64s(&m.t().contiguous()), "transpose on {dev}");
        // An in-place update of a tensor another handle shares: the other keeps its values.
        let n = rows * cols;
        let mt = m.t(); // a view: made dense before the kernel reads it
        let mut acc: Tensor<(usize,), E> = Tensor::full((n,), E::from_f64(0.5), dev);
        let before = acc.clone();
        // SAFETY: the kernel checks `i < n`, the length of both tensors.
        unsafe {
            kernel::launch(
                axpy_into::Op,
                LaunchConfig::new(n.div_ceil(128) as u32, 128),
                &mut [
                    Arg::elem(E::from_f64(2.0)),
                    Arg::input(&mt),
                    Arg::output(&mut acc),
                    Arg::usize(n),
                ],
            )
        }
        .unwrap_or_else(|e| panic!("{e}"));
        // The last block's sum, launched twice over the same ticket: each launch takes the
        // ticket from 0 and leaves it there.
        let blocks = 7;
        let x: Tensor<(usize,), E> =
            Tensor::from_vec(values(blocks * 32, 8, -2.0, 2.0), (blocks * 32,), dev);
        let mut parts: Tensor<(usize,), E> = Tensor::zeros((blocks,), dev);
        let mut ticket: Tensor<(usize,), E> = Tensor::zeros((1,), dev);
        let mut sums = Vec::new();
        for _ in 0..2 {
            let mut total: Tensor<(usize,), E> = Tensor::zeros((1,), dev);
            // SAFETY: block `b < blocks` reads its 32 values of `x` (`blocks * 32` long) and
            // writes `parts[b]`; the last block reads `parts` and writes `total[0]`.
            unsafe {
                kernel::launch(
                    sum_in_the_last_block::Op,
                    LaunchConfig::new(blocks as u32, 32),
                    &mut [
                        Arg::input(&x),
                        Arg::output(&mut parts),
                        Arg::output(&mut ticket),
                        Arg::output(&mut total),
                    ],
                )
            }
            .unwrap_or_else(|e| panic!("{e}"));
            sums.extend(f64s(&total));
        }
        assert_eq!(f64s(&ticket), vec![0.0], "the ticket handed back on {dev}");
        let want: f64 = f64s(&parts).iter().sum();
        assert!(
            (sums[0] - want).abs() <= 1e-2 * want.abs().max(1.0) && sums[0] == sums[1],
            "the last block's sum on {dev}: {sums:?} against {want}"
        );
        vec![
            ("transpose".into(), f64s(&t)),
            ("axpy in place".into(), f64s(&acc)),
            ("the shared handle".into(), f64s(&before)),
            ("the last block's sum".into(), sums),
        ]
    });
}

#[test]
fn user_simt_kernels_match_the_cpu() {
    every_float!(simt_case);
}

/// `Arg::words` hands a dense `i32` tensor to a `&[i32]` parameter on every device (the GPU
/// held to the CPU), and refuses a view by name.
#[test]
fn words_arguments_reach_i32_parameters_and_views_are_refused() {
    on_every_device::<f32>("words arguments", |dev| {
        let n = 300;
        let w: Vec<i32> = (0..2 * n as i32).map(|i| i * i % 1013 - 500).collect();
        let words: Tensor<(usize,), i32> = Tensor::from_vec(w.clone(), (2 * n,), dev);
        let mut out: Tensor<(usize,), f32> = Tensor::zeros((n,), dev);
        // SAFETY: thread `i < n` reads words `2 i` and `2 i + 1` of `2 n` and writes `out[i]`.
        unsafe {
            kernel::launch(
                word_differences::Op,
                LaunchConfig::new(n.div_ceil(128) as u32, 128),
                &mut [Arg::words(&words), Arg::output(&mut out), Arg::usize(n)],
            )
        }
        .unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<f64> = (0..n).map(|i| f64::from(w[2 * i] - w[2 * i + 1])).collect();
        assert_eq!(f64s(&out), want, "word differences on {dev}");
        let grid: Tensor<(usize, usize), i32> = Tensor::from_vec(w, (n, 2), dev);
        let view = grid.t();
        // SAFETY: refused before launch.
        let err = unsafe {
            kernel::launch(
                word_differences::Op,
                LaunchConfig::new(1, 32),
                &mut [Arg::words(&view), Arg::output(&mut out), Arg::usize(1)],
            )
        }
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("word_differences") && err.contains("dense"),
            "{err}"
        );
        vec![("word differences".into(), f64s(&out))]
    });
}

/// A kernel that calls `grid_sync` passes values between its blocks on every device (the
/// blocks run together natively, cooperatively on a GPU), and a grid of more blocks than can
/// be resident at once is refused by name, not left to hang.
#[test]
fn grid_sync_passes_values_between_blocks_and_an_oversized_grid_is_refused() {
    on_every_device::<f32>("grid_sync", |dev| {
        let (blocks, threads, rounds) = (6usize, 64usize, 5usize);
        let n = blocks * threads;
        let host: Vec<f32> = (0..n).map(|i| i as f32 - 100.0).collect();
        let x: Tensor<(usize,), f32> = Tensor::from_vec(host.clone(), (n,), dev);
        let mut a: Tensor<(usize,), f32> = Tensor::zeros((n,), dev);
        let mut b: Tensor<(usize,), f32> = Tensor::zeros((n,), dev);
        let launch = |grid: usize, a: &mut Tensor<(usize,), f32>, b: &mut Tensor<(usize,), f32>| {
            // SAFETY: thread `i` of the `grid * threads` (at most `n`) reads `x[i]` and
            // `a[(i + threads) % (grid * threads)]` and writes `a[i]` and `b[i]`.
            unsafe {
                kernel::launch(
                    pass_along_the_grid::Op,
                    LaunchConfig::new(grid as u32, threads as u32),
                    &mut [
                        Arg::input(&x),
                        Arg::output(a),
                        Arg::output(b),
                        Arg::usize(rounds),
                    ],
                )
            }
        };
        launch(blocks, &mut a, &mut b).unwrap_or_else(|e| panic!("{e}"));
        let want: Vec<f64> = (0..n)
            .map(|i| f64::from(host[(i + rounds * threads) % n]) * 32.0)
            .collect();
        assert_eq!(f64s(&a), want, "values passed along the grid on {dev}");
        // Twice, so the GPU's arrival counter is seen to leave each launch as it found it.
        launch(blocks, &mut a, &mut b).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f64s(&a), want, "a second launch on {dev}");
        let err = launch(1 << 20, &mut a, &mut b).unwrap_err().to_string();
        assert!(
            err.contains("pass_along_the_grid") && err.contains("grid_sync"),
            "{err}"
        );
        vec![("passed along".into(), f64s(&a))]
    });
}

#[test]
fn user_kernels_are_one_launch_and_name_themselves_in_errors() {
    let dev = match gpus() {
        Ok(g) => g[0],
        Err(why) => {
            println!("user kernel launches: skipped: no CUDA device: {why}");
            return;
        }
    };
    let x: Tensor<(usize,), f32> = Tensor::from_vec(values(4096, 5, -1.0, 1.0), (4096,), dev);
    let _ = x.map(gelu_affine::Op, &[1.5, -0.25]); // compiles or loads the kernel
    let before = rtx_backends::launch_count(dev);
    let y = x.map(gelu_affine::Op, &[1.5, -0.25]);
    assert_eq!(
        rtx_backends::launch_count(dev) - before,
        1,
        "one launch for a map"
    );
    assert_eq!(y.device(), dev);
    let host: Tensor<(usize,), f32> =
        Tensor::from_vec(values(4096, 6, -1.0, 1.0), (4096,), Device::Cpu);
    let msg = kernel::try_map2(mix::Op, &x, &host, &[0.5])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        msg.contains("mix") && msg.contains("different devices"),
        "{msg}"
    );
}

#[rtx::kernel(elementwise)]
fn fused_muladd<T: Float>(a: T, b: T, c: T) -> T {
    a.mul_add(b, c)
}

/// `mul_add` rounds once on every device (`fmaf` on a GPU, `f32::mul_add` on the CPU), so a
/// GPU's results are the CPU's bit for bit.
#[test]
fn mul_add_is_the_cpus_bit_for_bit_on_every_gpu() {
    let gpus = match gpus() {
        Ok(g) => g,
        Err(why) => {
            println!("mul_add: skipped: no CUDA device: {why}");
            return;
        }
    };
    let vals = |seed| Tensor::<(usize,)>::randn((4096usize,), seed, Device::Cpu);
    let (a, b, c) = (vals(1), vals(2), vals(3));
    let want = kernel::map3(fused_muladd::Op, &a, &b, &c, &[]).to_vec();
    for dev in gpus {
        let on = |x: &Tensor<(usize,)>| x.to_device(dev);
        let got = kernel::map3(fused_muladd::Op, &on(&a), &on(&b), &on(&c), &[]).to_vec();
        let same = got
            .iter()
            .zip(&want)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{dev:?}: mul_add differs from the CPU's");
    }
}
