//! A third backend, written here against `rtx_backends::Backend` alone, runs rtx's tensors,
//! autograd and optimizers with no change in `rtx`: "mirror" keeps its buffers as host bytes
//! behind its own handle, runs binary ops and matrix products (with the bias epilogue) with
//! its own loops, and leaves every other op to the host fallback. Its counters show which
//! path ran; its results must match the CPU's.

use rtx::nn::{Module, Visitor, VisitorMut, join};
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
    // Dropout has neither a mirror kernel nor a host fallback yet: the error says so.
    let s = Storage::from_vec(vec![1.0f32; 4], dev).unwrap();
    let e = s
        .dropout(&Layout::contiguous(&[4]), 0.5, 2.0, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`dropout` has no kernel on mirror:"), "{e}");
}

/// y = x w + b, as tests/optim.rs's model, on any device.
struct Lin {
    w: Tensor<Rank2<3, 2>, f64>,
    b: Tensor<Rank1<2>, f64>,
}

impl Module for Lin {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        self.w.visit(&join(prefix, "w."), v);
        self.b.visit(&join(prefix, "b."), v);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.w.visit_mut(&join(prefix, "w."), v);
        self.b.visit_mut(&join(prefix, "b."), v);
    }
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
