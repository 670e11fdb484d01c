//! A third backend, written here against `rtx_backends::Backend` alone, runs rtx's tensors,
//! autograd and optimizers with no change in `rtx`: "mirror" keeps its buffers as host bytes
//! behind its own handle, runs binary ops and matrix products (with the bias epilogue) with
//! its own loops, and leaves every other op to the host fallback. Its counters show which
//! path ran; its results must match the CPU's.

use crate::lin_model::Lin;
use rtx::nn::Module;
use rtx::prelude::*;
use rtx_backends::{Backend, Buffer, Gemm, Kernel, Layout, Storage, bytes_of, register_backend};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

/// The test backend: host bytes, and counters of what it was asked to do.
#[derive(Default)]
struct Mirror {
    uploads: AtomicUsize,
    downloads: AtomicUsize,
    launches: AtomicUsize,
    gemms: AtomicUsize,
}

/// A mirror buffer: the elements' bytes, behind a lock because `copy` writes in place.
struct Bytes(RwLock<Vec<u8>>);

impl Mirror {
    fn bytes<'b>(&self, b: &'b Buffer) -> rtx_backends::Result<&'b Bytes> {
        b.handle::<Bytes>()
            .ok_or_else(|| rtx_backends::BackendError::BadArgument {
                op: "mirror",
                msg: "a buffer of another backend".into(),
            })
    }

    /// The elements of `b` as `f32` or `f64` values (`None` for other types).
    fn floats(&self, b: &Buffer) -> Option<Vec<f64>> {
        let data = self.bytes(b).ok()?.0.read().unwrap();
        match b.dtype() {
            DType::F32 => Some(
                data.chunks_exact(4)
                    .map(|c| f32::from_ne_bytes(c.try_into().unwrap()) as f64)
                    .collect(),
            ),
            DType::F64 => Some(
                data.chunks_exact(8)
                    .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
                    .collect(),
            ),
            _ => None,
        }
    }

    /// A buffer of `values` as `dtype` (`f32` or `f64`).
    fn store(&self, dtype: DType, values: &[f64]) -> Buffer {
        let bytes = match dtype {
            DType::F32 => {
                let v: Vec<f32> = values.iter().map(|&x| x as f32).collect();
                bytes_of(&v).to_vec()
            }
            _ => bytes_of(values).to_vec(),
        };
        Buffer::new(dtype, values.len(), Bytes(RwLock::new(bytes)))
    }
}

/// The values a layout views, in logical order.
fn gather(values: &[f64], l: &Layout) -> Vec<f64> {
    l.offsets_from(0).map(|o| values[o]).collect()
}

// ANCHOR: backend
impl Backend for Mirror {
    fn name(&self) -> String {
        "mirror".into()
    }

    fn upload(&self, dtype: DType, bytes: &[u8]) -> rtx_backends::Result<Buffer> {
        self.uploads.fetch_add(1, Ordering::Relaxed);
        let len = bytes.len() / dtype.size_in_bytes();
        Ok(Buffer::new(dtype, len, Bytes(RwLock::new(bytes.to_vec()))))
    }

    fn download(&self, buf: &Buffer, range: Range<usize>) -> rtx_backends::Result<Vec<u8>> {
        self.downloads.fetch_add(1, Ordering::Relaxed);
        let size = buf.dtype().size_in_bytes();
        let data = self.bytes(buf)?.0.read().unwrap();
        Ok(data[range.start * size..range.end * size].to_vec())
    }

    fn copy(&self, src: &Buffer, range: Range<usize>, dst: &Buffer) -> rtx_backends::Result<()> {
        let size = src.dtype().size_in_bytes();
        let part =
            self.bytes(src)?.0.read().unwrap()[range.start * size..range.end * size].to_vec();
        let mut to = self.bytes(dst)?.0.write().unwrap();
        to[..part.len()].copy_from_slice(&part);
        Ok(())
    }

    // ANCHOR_END: backend
    fn launch(&self, kernel: &Kernel<'_>) -> Option<rtx_backends::Result<Buffer>> {
        let Kernel::Binary {
            op,
            lhs,
            lhs_layout,
            rhs,
            rhs_layout,
        } = *kernel
        else {
            return None;
        };
        let f: fn(f64, f64) -> f64 = match op {
            rtx::op::BinaryOp::Add => |a, b| a + b,
            rtx::op::BinaryOp::Sub => |a, b| a - b,
            rtx::op::BinaryOp::Mul => |a, b| a * b,
            _ => return None,
        };
        let (a, b) = (self.floats(lhs)?, self.floats(rhs)?);
        self.launches.fetch_add(1, Ordering::Relaxed);
        let (a, b) = (gather(&a, lhs_layout), gather(&b, rhs_layout));
        // f32 sums rounded from f64 equal f32 arithmetic for a single add, sub or mul.
        let out: Vec<f64> = a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect();
        Some(Ok(self.store(lhs.dtype(), &out)))
    }

    fn gemm(&self, g: &Gemm<'_>) -> Option<rtx_backends::Result<Buffer>> {
        // Only unbatched products of f64: others take the host fallback.
        if g.lhs.dtype() != DType::F64 || g.lhs_layout.rank() != 2 {
            return None;
        }
        self.gemms.fetch_add(1, Ordering::Relaxed);
        let (a, b) = (self.floats(g.lhs)?, self.floats(g.rhs)?);
        let (m, k, n) = (
            g.lhs_layout.dims()[0],
            g.lhs_layout.dims()[1],
            g.rhs_layout.dims()[1],
        );
        let (a, b) = (gather(&a, g.lhs_layout), gather(&b, g.rhs_layout));
        let bias = match g.bias {
            Some((c, l)) => gather(&self.floats(c)?, l),
            None => vec![0.0; n],
        };
        let mut out = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                out[i * n + j] = dot + bias[j];
            }
        }
        Some(Ok(self.store(DType::F64, &out)))
    }
}

// ANCHOR: register
/// The mirror backend, registered once for the whole test binary.
fn mirror() -> (&'static Mirror, Device) {
    static M: OnceLock<(Arc<Mirror>, Device)> = OnceLock::new();
    let (m, d) = M.get_or_init(|| {
        let m = Arc::new(Mirror::default());
        let d = register_backend(m.clone());
        (m, d)
    });
    (m, *d)
}
// ANCHOR_END: register

#[test]
fn a_registered_backend_is_a_device_that_prints_and_parses() {
    let (_, dev) = mirror();
    assert!(dev.to_string().starts_with("mirror:"), "{dev}");
    assert_eq!(dev.to_string().parse::<Device>().unwrap(), dev);
    let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], (Const::<3>,), dev);
    assert_eq!(t.device(), dev);
    assert_eq!(t.to_vec(), [1.0, 2.0, 3.0]);
    assert_eq!(t.to_device(Device::Cpu).device(), Device::Cpu);
}

#[test]
fn ops_on_a_registered_backend_match_the_cpu() {
    let (m, dev) = mirror();
    let x: Tensor<Rank2<3, 4>, f32> = Tensor::randn((Const, Const), 7, Device::Cpu);
    let y: Tensor<Rank2<3, 4>, f32> = Tensor::randn((Const, Const), 8, Device::Cpu);
    let (xm, ym) = (x.to_device(dev), y.to_device(dev));
    let launches = m.launches.load(Ordering::Relaxed);

    // Native kernels: the binary ops.
    let s = &xm + &ym;
    assert_eq!(s.device(), dev);
    assert_eq!(s.to_vec(), (&x + &y).to_vec());
    assert_eq!((&xm * &ym).to_vec(), (&x * &y).to_vec());
    assert!(m.launches.load(Ordering::Relaxed) >= launches + 2);

    // The host fallback: unary ops, reductions, softmax, casts, a transposed view, broadcast.
    let e = xm.exp();
    assert_eq!(e.device(), dev);
    assert_eq!(e.to_vec(), x.exp().to_vec());
    assert_eq!(xm.sum_all().to_vec(), x.sum_all().to_vec());
    assert_eq!(xm.softmax::<1>().to_vec(), x.softmax::<1>().to_vec());
    assert_eq!(xm.cast::<f64>().to_vec(), x.cast::<f64>().to_vec());
    assert_eq!(xm.cast::<f64>().device(), dev);
    let t = xm.transpose::<0, 1>();
    assert_eq!(
        (&t + &t).to_vec(),
        (&x.transpose::<0, 1>() + &x.transpose::<0, 1>()).to_vec()
    );
    assert!(m.downloads.load(Ordering::Relaxed) > 0 && m.uploads.load(Ordering::Relaxed) > 0);
}

#[test]
fn a_missing_kernel_and_a_device_mix_are_named() {
    let (_, dev) = mirror();
    let x = Tensor::from_vec(vec![0.5f32, -1.0], (Const::<2>,), dev);
    let cpu = Tensor::from_vec(vec![1.0f32, 2.0], (Const::<2>,), Device::Cpu);
    let mixed = x
        .try_binary::<rtx::op::markers::Add, _>(&cpu)
        .unwrap_err()
        .to_string();
    assert!(
        mixed.contains("mirror:") && mixed.contains("cpu"),
        "{mixed}"
    );
    // Statistics a norm kept on one device do not serve a backward on another.
    let l = Layout::contiguous(&[1, 2]);
    let on_cpu = Storage::from_vec(vec![0.5f32, -1.0], Device::Cpu).unwrap();
    let (_, stats) = on_cpu.norm_rows(&l, None, None, 1e-5, true).unwrap();
    let s = Storage::from_vec(vec![0.5f32, -1.0], dev).unwrap();
    let e = s
        .norm_rows_backward(&l, (&s, &l), None, &stats, (false, false))
        .unwrap_err()
        .to_string();
    assert!(e.contains("another device than mirror:"), "{e}");
}

#[test]
fn conv_and_pool_with_their_gradients_match_the_cpu() {
    let (_, dev) = mirror();
    let x: Tensor<Rank4<2, 2, 6, 6>, f32> =
        Tensor::randn((Const, Const, Const, Const), 11, Device::Cpu);
    let w: Tensor<Rank4<3, 2, 3, 3>, f32> =
        Tensor::randn((Const, Const, Const, Const), 12, Device::Cpu);
    let run = |device: Device| {
        let x = x.to_device(device).requires_grad();
        let w = w.to_device(device).requires_grad();
        let y: Tensor<Rank4<2, 3, 4, 4>, f32> = x.conv2d(&w, Conv::<1>);
        let p: Tensor<Rank4<2, 3, 2, 2>, f32> = y.max_pool2d(Pool::<2, 2>);
        assert_eq!(p.device(), device);
        let grads = p.sum_all().backward();
        let (gx, gw) = (grads.get(&x).unwrap(), grads.get(&w).unwrap());
        assert_eq!(gx.device(), device);
        (p.to_vec(), gx.to_vec(), gw.to_vec())
    };
    assert_eq!(run(dev), run(Device::Cpu));
}

#[test]
fn index_select_and_gather_with_their_gradients_match_the_cpu() {
    let (_, dev) = mirror();
    let x: Tensor<Rank2<4, 3>, f32> = Tensor::randn((Const, Const), 13, Device::Cpu);
    let idx: Tensor<Rank1<3>, i64> = Tensor::from_array([3, 1, 3], Device::Cpu);
    let at: Tensor<Rank2<4, 2>, i64> =
        Tensor::from_array([[2, 0], [1, 1], [0, 2], [2, 2]], Device::Cpu);
    let run = |device: Device| {
        let x = x.to_device(device).requires_grad();
        let (idx, at) = (idx.to_device(device), at.to_device(device));
        let picked = x.index_select::<0, _>(&idx);
        let gathered = x.gather::<1, _>(&at);
        assert_eq!((picked.device(), gathered.device()), (device, device));
        // Their gradients scatter back: index_add and scatter_add.
        let g1 = picked.sum_all().backward().get(&x).unwrap().to_vec();
        let g2 = gathered.sum_all().backward().get(&x).unwrap().to_vec();
        (picked.to_vec(), gathered.to_vec(), g1, g2)
    };
    assert_eq!(run(dev), run(Device::Cpu));
    // A bad index is named as on the CPU: the host copies run the same checks.
    let bad: Tensor<Rank1<1>, i64> = Tensor::from_array([7], dev);
    let e = x.to_device(dev).try_index_select::<0, _>(&bad).err();
    let c = x
        .try_index_select::<0, _>(&bad.to_device(Device::Cpu))
        .err();
    assert_eq!(e.map(|e| e.to_string()), c.map(|e| e.to_string()));
}

#[test]
fn layer_norm_and_its_fused_backward_match_the_cpu() {
    let (_, dev) = mirror();
    let x: Tensor<Rank2<4, 3>, f32> = Tensor::randn((Const, Const), 14, Device::Cpu);
    // Inference takes the fused rows on every device.
    let forward = |device: Device| {
        let mut ln = LayerNorm::<3>::new(device);
        ln.weight = Tensor::from_array([0.5, 2.0, -1.0], device);
        let y = ln.forward(&x.to_device(device));
        assert_eq!(y.device(), device);
        y.to_vec()
    };
    assert_eq!(forward(dev), forward(Device::Cpu));

    // The fused backward, with the statistics its forward kept for the mirror.
    let (l, pl) = (Layout::contiguous(&[4, 3]), Layout::contiguous(&[3]));
    let g: Vec<f32> = (0..12).map(|i| i as f32 / 4.0 - 1.0).collect();
    let run = |device: Device| {
        let put = |v: Vec<f32>| Storage::from_vec(v, device).unwrap();
        let (xs, gs) = (put(x.to_vec()), put(g.clone()));
        let (w, b) = (put(vec![0.5, 2.0, -1.0]), put(vec![0.1, 0.0, -0.2]));
        let (y, stats) = xs
            .norm_rows(&l, Some((&w, &pl)), Some((&b, &pl)), 1e-5, true)
            .unwrap();
        let (dx, dw, db) = gs
            .norm_rows_backward(&l, (&xs, &l), Some((&w, &pl)), &stats, (true, true))
            .unwrap();
        let (dw, db) = (dw.unwrap(), db.unwrap());
        for s in [&y, &dx, &dw, &db] {
            assert_eq!(s.device(), device);
        }
        let out = [y.to_vec(&l), dx.to_vec(&l), dw.to_vec(&pl), db.to_vec(&pl)];
        (out, stats.mean().unwrap(), stats.rstd().unwrap())
    };
    assert_eq!(run(dev), run(Device::Cpu));
}

#[test]
fn cross_entropy_and_its_gradient_match_the_cpu() {
    let (_, dev) = mirror();
    let logits: Tensor<Rank2<4, 5>, f32> = Tensor::randn((Const, Const), 15, Device::Cpu);
    let targets: Tensor<Rank1<4>, i64> = Tensor::from_array([1, 4, -100, 2], Device::Cpu);
    let run = |device: Device| {
        let x = logits.to_device(device).requires_grad();
        let opts = CrossEntropy {
            ignore_index: Some(-100),
            label_smoothing: 0.1,
        };
        let loss = cross_entropy_with(&x, &targets.to_device(device), opts);
        assert_eq!(loss.device(), device);
        let g = loss.backward().get(&x).unwrap();
        assert_eq!(g.device(), device);
        (loss.to_vec(), g.to_vec())
    };
    assert_eq!(run(dev), run(Device::Cpu));
    // A target out of range is named as on the CPU.
    let bad: Tensor<Rank1<4>, i64> = Tensor::from_array([1, 5, 0, 0], dev);
    let e = try_cross_entropy_with(&logits.to_device(dev), &bad, CrossEntropy::default());
    let e = e.err().unwrap().to_string();
    assert!(e.contains("target 5 at [1] is outside 0..5"), "{e}");
}

#[test]
fn dropout_and_random_draws_match_the_cpu() {
    let (_, dev) = mirror();
    let x: Tensor<Rank2<8, 8>, f32> = Tensor::randn((Const, Const), 16, Device::Cpu);
    let run = |device: Device| {
        // A fresh layer per device: each call of one layer draws a new mask.
        let drop = Dropout::new(0.25, 5);
        let x = x.to_device(device).requires_grad();
        let y = drop.forward(&x);
        assert_eq!(y.device(), device);
        let g = (&y * &y).sum_all().backward().get(&x).unwrap();
        (y.to_vec(), g.to_vec())
    };
    let (on_mirror, on_cpu) = (run(dev), run(Device::Cpu));
    assert_eq!(on_mirror, on_cpu);
    assert!(on_cpu.0.contains(&0.0), "some elements are dropped");

    let n: Tensor<Rank2<3, 4>, f32> = Tensor::randn((Const, Const), 9, dev);
    assert_eq!(n.device(), dev);
    let cpu: Tensor<Rank2<3, 4>, f32> = Tensor::randn((Const, Const), 9, Device::Cpu);
    assert_eq!(n.to_vec(), cpu.to_vec());
    let u: Tensor<Rank1<16>, f64> = Tensor::rand((Const,), 10, dev);
    assert_eq!(
        u.to_vec(),
        Tensor::<Rank1<16>, f64>::rand((Const,), 10, Device::Cpu).to_vec()
    );
    let i: Tensor<Rank1<16>, i64> = Tensor::randint((Const,), -3, 3, 11, dev);
    assert_eq!(i.device(), dev);
    let c: Tensor<Rank1<16>, i64> = Tensor::randint((Const,), -3, 3, 11, Device::Cpu);
    assert_eq!(i.to_vec(), c.to_vec());
}

/// Three Adam steps of the linear model on `device`; the parameters after each step.
fn train(device: Device) -> Vec<Vec<f64>> {
    let w: Tensor<Rank2<3, 2>, f64> = Tensor::randn((Const, Const), 1, Device::Cpu);
    let b: Tensor<Rank1<2>, f64> = Tensor::randn((Const,), 2, Device::Cpu);
    let mut m = Lin {
        w: w.to_device(device),
        b: b.to_device(device),
    };
    m.track_gradients();
    let x: Tensor<Rank2<4, 3>, f64> = Tensor::randn((Const, Const), 3, Device::Cpu);
    let t: Tensor<Rank2<4, 2>, f64> = Tensor::randn((Const, Const), 4, Device::Cpu);
    let (x, t) = (x.to_device(device), t.to_device(device));
    let mut opt = Adam::new(0.01);
    let mut after = Vec::new();
    for _ in 0..3 {
        let d = &(&x.matmul(&m.w) + &m.b) - &t;
        let loss = (&d * &d).mean_all();
        let grads = loss.backward();
        opt.step(&mut m, &grads);
        assert_eq!(m.w.device(), device);
        let mut p = m.w.to_vec();
        p.extend(m.b.to_vec());
        after.push(p);
    }
    after
}

#[test]
fn a_model_trains_on_a_registered_backend_as_on_the_cpu() {
    let (m, dev) = mirror();
    let gemms = m.gemms.load(Ordering::Relaxed);
    let on_cpu = train(Device::Cpu);
    let on_mirror = train(dev);
    // The products ran in the mirror's own loop: x w forward and xᵀ g for w's gradient, in
    // each of the three steps.
    let ran = m.gemms.load(Ordering::Relaxed) - gemms;
    assert!(ran >= 6, "{ran} products in the mirror's loop");
    for (step, (a, b)) in on_cpu.iter().zip(&on_mirror).enumerate() {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(1.0),
                "step {step}, parameter {i}: cpu {x}, mirror {y}"
            );
        }
    }
}
