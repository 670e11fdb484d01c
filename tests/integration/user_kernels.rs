//! `rtx::kernel` on the CPU: users' own `#[kernel]`s applied to tensors (elementwise with
//! broadcasting and uniforms, gradients through the derived kernels, reductions along a typed
//! axis, SIMT launches writing an output tensor), held to the kernels' native functions and
//! to the built-in ops, and the errors for wrong uniforms, missing derivatives and wrong
//! SIMT arguments. `tests/devices/user_kernels.rs` runs the same kernels on GPUs.

use rtx::kernel::{self, Arg, LaunchConfig};
use rtx::prelude::*;

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
fn muladd<T: Float>(a: T, b: T, c: T) -> T {
    a * b + c
}

#[rtx::kernel(elementwise)]
fn fused_muladd<T: Float>(a: T, b: T, c: T) -> T {
    a.mul_add(b, c)
}

/// Integer uniforms: `x` to the power `n`, counting in a loop (so no derivative).
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

/// `out[i] = a * x[i] + out[i]` for `i < n`.
#[rtx::kernel]
fn axpy_into<T: Float>(a: T, x: &[T], out: &mut [T], n: usize) {
    let i = block_idx_x() * block_dim_x() + thread_idx_x();
    if i < n {
        out[i] = a * x[i] + out[i];
    }
}

/// The sum of each block's `block_dim_x()` elements, through shared memory.
#[rtx::kernel]
fn block_sums<T: Float>(x: &[T], out: &mut [T], n: usize) {
    #[shared]
    let part: [T; 64];
    let tid = thread_idx_x();
    let i = block_idx_x() * block_dim_x() + tid;
    part[tid] = if i < n { x[i] } else { 0.0 };
    sync_threads();
    let mut s = block_dim_x() / 2;
    while s > 0 {
        if tid < s {
            part[tid] += part[tid + s];
        }
        sync_threads();
        s /= 2;
    }
    if tid == 0 {
        out[block_idx_x()] = part[0];
    }
}

fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0
        })
        .collect()
}

fn close(got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "element {i}: got {g}, want {w}"
        );
    }
}

#[test]
fn map_is_the_native_function_elementwise_on_any_layout() {
    let x: Tensor<Rank2<3, 5>, f64> = Tensor::from_vec(values(15, 1), (Const, Const), Device::Cpu);
    let y = x.map(gelu_affine::Op, &[1.5, -0.25]);
    let want: Vec<f64> = x
        .to_vec()
        .iter()
        .map(|&v| gelu_affine(v, 1.5, -0.25))
        .collect();
    assert_eq!(y.to_vec(), want);
    // A transposed view is read through its strides.
    let yt = x.t().map(gelu_affine::Op, &[1.5, -0.25]);
    assert_eq!(yt.to_vec(), y.t().contiguous().to_vec());
    // The same math from built-in ops.
    close(&y.to_vec(), &(&x * 1.5 - 0.25).gelu_tanh().to_vec(), 1e-12);
    // f16 computes in f32 and rounds once, as the native function does.
    let h = x.cast::<f16>();
    let yh = kernel::map(gelu_affine::Op, &h, &[1.5, -0.25]);
    let want: Vec<f16> = h
        .to_vec()
        .iter()
        .map(|&v| gelu_affine(v, f16::from_f64(1.5), f16::from_f64(-0.25)))
        .collect();
    assert_eq!(yh.to_vec(), want);
}

#[test]
fn map2_and_map3_broadcast_like_the_builtin_ops() {
    let x: Tensor<Rank2<4, 3>, f64> = Tensor::from_vec(values(12, 2), (Const, Const), Device::Cpu);
    let row: Tensor<Rank1<3>, f64> = Tensor::from_vec(values(3, 3), (Const,), Device::Cpu);
    let y = kernel::map2(mix::Op, &x, &row, &[0.25]);
    let want = (&x * &x * 0.25) + (row.exp() * 0.75);
    close(&y.to_vec(), &want.to_vec(), 1e-12);
    // The broadcast operand may come first too.
    let y2 = kernel::map2(mix::Op, &row, &x, &[0.25]);
    close(
        &y2.to_vec(),
        &((&row * &row * 0.25) + (x.exp() * 0.75)).to_vec(),
        1e-12,
    );
    let c: Tensor<Rank0, f64> = Tensor::full((), 0.5, Device::Cpu);
    let z = kernel::map3(muladd::Op, &row, &x, &c, &[]);
    close(&z.to_vec(), &((&x * &row) + 0.5).to_vec(), 1e-12);
    // Run-time dims that do not broadcast are an error naming the kernel.
    let a: Tensor<(usize,), f64> = Tensor::from_vec(values(4, 4), (4,), Device::Cpu);
    let b: Tensor<(usize,), f64> = Tensor::from_vec(values(5, 5), (5,), Device::Cpu);
    let err = kernel::try_map2(mix::Op, &a, &b, &[0.5])
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_ref()
            .is_some_and(|m| m.starts_with("mix: shape mismatch")),
        "{err:?}"
    );
}

/// `mul_add` rounds once: `(1 + 2^-12)^2 - 1` is `2^-11 + 2^-24` fused, where the rounded
/// product loses the `2^-24`; its derivative is `b da + a db + dc`.
#[test]
fn mul_add_rounds_once_and_differentiates() {
    let e = 1.0 + 2f32.powi(-12);
    let a: Tensor<(usize,)> = Tensor::from_vec(vec![e, 2.0], (2,), Device::Cpu);
    let c: Tensor<(usize,)> = Tensor::from_vec(vec![-1.0, 0.5], (2,), Device::Cpu);
    let fused = kernel::map3(fused_muladd::Op, &a, &a, &c, &[]).to_vec();
    assert_eq!(fused, vec![2f32.powi(-11) + 2f32.powi(-24), 4.5]);
    assert_ne!(e * e - 1.0, fused[0], "the unfused form rounds the product");
    let (ag, bg, cg) = (
        a.clone().requires_grad(),
        c.clone().requires_grad(),
        c.clone().requires_grad(),
    );
    let grads = kernel::map3(fused_muladd::Op, &ag, &bg, &cg, &[])
        .sum_all()
        .backward();
    assert_eq!(grads.get(&ag).unwrap().to_vec(), c.to_vec());
    assert_eq!(grads.get(&bg).unwrap().to_vec(), a.to_vec());
    assert_eq!(grads.get(&cg).unwrap().to_vec(), vec![1.0, 1.0]);
}

#[test]
fn gradients_flow_through_the_derived_kernels() {
    let x: Tensor<Rank2<4, 3>, f64> = Tensor::from_vec(values(12, 6), (Const, Const), Device::Cpu);
    let row: Tensor<Rank1<3>, f64> = Tensor::from_vec(values(3, 7), (Const,), Device::Cpu);
    let (xg, rg) = (x.clone().requires_grad(), row.clone().requires_grad());
    let loss = kernel::map2(mix::Op, &xg, &rg, &[0.25])
        .map(gelu_affine::Op, &[0.5, 0.1])
        .sum_all();
    let grads = loss.backward();
    let (xb, rb) = (x.clone().requires_grad(), row.clone().requires_grad());
    // `mix` and then gelu_affine's `gelu_tanh(a * z + b)`, spelled with built-in ops.
    let z = (&xb * &xb * 0.25) + (rb.exp() * 0.75);
    let loss_b = (z * 0.5 + 0.1).gelu_tanh().sum_all();
    let grads_b = loss_b.backward();
    assert!((loss.to_vec()[0] - loss_b.to_vec()[0]).abs() < 1e-10);
    let get = |g: &rtx::Gradients, t: &Tensor<Rank2<4, 3>, f64>| g.get(t).map(|t| t.to_vec());
    close(
        &get(&grads, &xg).unwrap_or_default(),
        &get(&grads_b, &xb).unwrap_or_default(),
        1e-10,
    );
    // The broadcast row's gradient is summed over the rows it was broadcast along.
    let dr = grads.get(&rg).map(|t| t.to_vec()).unwrap_or_default();
    assert_eq!(dr.len(), 3);
    close(
        &dr,
        &grads_b.get(&rb).map(|t| t.to_vec()).unwrap_or_default(),
        1e-10,
    );
}

#[test]
fn uniforms_and_missing_derivatives_are_errors_naming_the_kernel() {
    let x: Tensor<Rank1<4>, f64> = Tensor::from_vec(values(4, 8), (Const,), Device::Cpu);
    let msg = |r: rtx::Result<Tensor<Rank1<4>, f64>>| r.err().map(|e| e.to_string());
    assert_eq!(
        msg(x.try_map(gelu_affine::Op, &[1.0])).as_deref(),
        Some("gelu_affine: the kernel takes 2 uniform(s) (a: T, b: T), 1 given")
    );
    assert_eq!(
        msg(x.try_map(pow_loop::Op, &[2.5])).as_deref(),
        Some("pow_loop: uniform `n` is a `usize`, and 2.5 is not one")
    );
    assert_eq!(
        msg(x.try_map(pow_loop::Op, &[-1.0])).as_deref(),
        Some("pow_loop: uniform `n` is a `usize`, and -1 is not one")
    );
    let cubed = x.map(pow_loop::Op, &[3.0]);
    close(&cubed.to_vec(), &x.pow(3.0).to_vec(), 1e-12);
    // A loop has no derived derivative: applying the kernel to a tensor with history fails,
    // and succeeds without recording under `no_grad`.
    let xg = x.clone().requires_grad();
    let err = msg(xg.try_map(pow_loop::Op, &[3.0])).unwrap_or_default();
    assert!(
        err.starts_with("pow_loop: input `x` records gradients"),
        "{err}"
    );
    let quiet = rtx::no_grad(|| xg.map(pow_loop::Op, &[3.0]));
    assert!(!quiet.tracks_grad());
}

#[test]
fn reduce_with_matches_the_native_reduction_and_the_builtin_ops() {
    let x: Tensor<Rank3<2, 3, 4>, f64> =
        Tensor::from_vec(values(24, 9), (Const, Const, Const), Device::Cpu);
    let abs = x.abs();
    close(
        &x.reduce_with::<0>(l1::Op).to_vec(),
        &abs.sum::<0>().to_vec(),
        1e-12,
    );
    close(
        &x.reduce_with::<1>(l1::Op).to_vec(),
        &abs.sum::<1>().to_vec(),
        1e-12,
    );
    let last: Tensor<Rank2<2, 3>, f64> = x.reduce_with::<2>(l1::Op);
    let (native, dims) = l1::reduce_axis(&x.to_vec(), &[2, 3, 4], 2, false).unwrap_or_default();
    assert_eq!((last.to_vec(), last.dims().to_vec()), (native, dims));
    // A strided view is reduced in logical order.
    let m: Tensor<Rank2<3, 5>, f64> = Tensor::from_vec(values(15, 10), (Const, Const), Device::Cpu);
    close(
        &m.t().reduce_with::<1>(l1::Op).to_vec(),
        &m.abs().sum::<0>().to_vec(),
        1e-12,
    );
    let err = m
        .clone()
        .requires_grad()
        .try_reduce_with::<0>(l1::Op)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with("l1: the input"), "{err}");
}

#[test]
fn launch_writes_the_output_tensor_in_place() {
    let n = 100;
    let x: Tensor<(usize,), f32> = Tensor::from_vec(
        values(n, 11).iter().map(|&v| v as f32).collect(),
        (n,),
        Device::Cpu,
    );
    let mut y: Tensor<(usize,), f32> = Tensor::full((n,), 1.0, Device::Cpu);
    let before = y.clone(); // shares y's storage: the launch must not write through it
    let cfg = LaunchConfig::new(4, 32);
    // SAFETY: the kernel checks `i < n`, the length of both tensors.
    unsafe {
        kernel::launch(
            axpy_into::Op,
            cfg,
            &mut [
                Arg::elem(2.0),
                Arg::input(&x),
                Arg::output(&mut y),
                Arg::usize(n),
            ],
        )
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let want: Vec<f32> = x.to_vec().iter().map(|v| 2.0 * v + 1.0).collect();
    assert_eq!(y.to_vec(), want);
    assert_eq!(before.to_vec(), vec![1.0; n]);
    assert!(!y.shares_storage_with(&before));
}

#[test]
fn launch_with_shared_memory_reads_views_densely() {
    // A transposed input is made dense in logical order before the kernel sees it.
    let m: Tensor<Rank2<8, 16>, f64> =
        Tensor::from_vec(values(128, 12), (Const, Const), Device::Cpu);
    let t = m.t();
    let mut sums: Tensor<Rank1<2>, f64> = Tensor::zeros((Const,), Device::Cpu);
    // SAFETY: `block_sums` reads `x[i]` only for `i < n` and writes `out[block]` for its 2
    // blocks.
    unsafe {
        kernel::launch(
            block_sums::Op,
            LaunchConfig::new(2, 64),
            &mut [Arg::input(&t), Arg::output(&mut sums), Arg::usize(128)],
        )
    }
    .unwrap_or_else(|e| panic!("{e}"));
    let dense = t.contiguous().to_vec();
    let want: Vec<f64> = dense.chunks(64).map(|c| c.iter().sum()).collect();
    close(&sums.to_vec(), &want, 1e-12);
}

#[test]
fn launch_arguments_are_checked() {
    let x: Tensor<Rank1<4>> = Tensor::ones((Const,), Device::Cpu);
    let mut y: Tensor<Rank1<4>> = Tensor::zeros((Const,), Device::Cpu);
    let cfg = LaunchConfig::new(1, 32);
    let run = |args: &mut [Arg<'_, f32>]| {
        // SAFETY: every call either fails before running or stays inside the 4 elements.
        unsafe { kernel::launch(axpy_into::Op, cfg, args) }
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let few = run(&mut [Arg::elem(1.0), Arg::input(&x)]);
    assert_eq!(
        few,
        "axpy_into: kernel `axpy_into` takes 4 argument(s) (a, x, out, n), 2 given"
    );
    let swapped = run(&mut [
        Arg::elem(1.0),
        Arg::usize(4),
        Arg::output(&mut y),
        Arg::usize(4),
    ]);
    assert!(
        swapped.contains("parameter `x` is an input buffer (&[T]), the argument given is a usize"),
        "{swapped}"
    );
    let mut tracked = y.clone().requires_grad();
    let grad = run(&mut [
        Arg::elem(1.0),
        Arg::input(&x),
        Arg::output(&mut tracked),
        Arg::usize(4),
    ]);
    assert!(grad.contains("records gradients"), "{grad}");
    // SAFETY: fails before running: a block may hold at most 1024 threads.
    let big = unsafe {
        kernel::launch(
            axpy_into::Op,
            LaunchConfig::new(1, 2048),
            &mut [
                Arg::elem(1.0),
                Arg::input(&x),
                Arg::output(&mut y),
                Arg::usize(4),
            ],
        )
    };
    assert!(big.is_err());
}

// ANCHOR: table_kernel
/// A SIMT kernel over a table of buffers (the book's example): one block per buffer.
#[rtx::kernel]
fn axpy_all<T: Float>(ys: &[&mut [T]], xs: &[&[T]], lens: &[usize], n: usize, a: T) {
    let t = block_idx_x();
    if t < n {
        let mut i = thread_idx_x();
        while i < lens[t] {
            ys[t][i] = ys[t][i] + a * xs[t][i];
            i += block_dim_x();
        }
    }
}
// ANCHOR_END: table_kernel

#[test]
fn a_table_of_buffers_is_indexed_row_then_element() {
    // ANCHOR: table_call
    let (mut y0, mut y1) = (vec![1.0f32], vec![1.0f32, 2.0, 3.0]);
    axpy_all(
        LaunchConfig::new(2, 32),
        &mut [&mut y0, &mut y1],
        &[&[1.0], &[1.0, 1.0, 1.0]],
        &[1, 3],
        2,
        2.0,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((y0, y1), (vec![3.0], vec![3.0, 4.0, 5.0]));
    // ANCHOR_END: table_call
    // Tables are launched by the backends' entry points, not over tensors.
    let x: Tensor<(usize,)> = Tensor::from_vec(vec![1.0, 2.0], (2,), Device::Cpu);
    let mut out: Tensor<(usize,)> = Tensor::zeros((2,), Device::Cpu);
    // SAFETY: the launch is refused before the kernel runs.
    let r = unsafe {
        kernel::launch(
            axpy_all::Op,
            LaunchConfig::new(1, 32),
            &mut [
                Arg::output(&mut out),
                Arg::input(&x),
                Arg::input(&x),
                Arg::usize(1),
                Arg::elem(1.0),
            ],
        )
    };
    assert!(r.is_err(), "a table parameter cannot take a tensor");
}
