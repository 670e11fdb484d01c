//! Backend entry points for fused optimizer updates (the GPU side in
//! `rtx-backends/src/cuda/ops_optim.rs`). `adam_update` and `sgd_update` take the parameter
//! and gradient as viewed (any layout) and dense state, and return fresh dense storage; their
//! `_in_place` forms overwrite a parameter and state that the caller owns alone (tensors share
//! storage, so only the caller can know that no one else reads them), which saves a copy of all
//! four buffers per step. On devices without an in-place kernel the `_in_place` forms run the
//! out-of-place update and keep its results.

use super::erased::{AnyMut, AnyRef, AnyStorage, ForFloat};
use super::{Storage, same_device};
use crate::cpu::optim;
use crate::{AdamScalars, SgdScalars};
use crate::{BackendError, Layout, Result};
use rtx_kernels::Float;

/// Checks that a dense state buffer has one element per parameter element.
fn check_len(op: &'static str, len: usize, n: usize) -> Result<()> {
    if len == n {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op,
            msg: format!("optimizer state holds {len} elements for a parameter of {n}"),
        })
    }
}

/// A dense state buffer of `n` elements on the parameter's device, copied to the host.
fn host_state<E: Float>(op: &'static str, s: &Storage<E>, n: usize) -> Result<Vec<E>> {
    check_len(op, s.len(), n)?;
    s.try_to_vec(&Layout::contiguous(&[n]))
}

/// The GPU buffer of a state or gradient operand of an update on `dev`.
fn cuda_of<'a, E: Float>(
    op: &'static str,
    dev: crate::Device,
    s: &'a Storage<E>,
) -> Result<&'a crate::cuda::CudaStorage<E>> {
    match s {
        Storage::Cuda(c) if s.device() == dev => Ok(c),
        _ => Err(BackendError::DeviceMismatch {
            op,
            lhs: dev,
            rhs: s.device(),
        }),
    }
}

impl<E: Float> Storage<E> {
    /// One fused Adam/AdamW step. `self`/`pl` is the parameter, `grad`/`gl` its gradient (same
    /// logical sizes); `m`, `v` and `vmax` are dense. Returns the new parameter (dense, in
    /// logical order), `m`, `v` and `vmax`.
    #[allow(clippy::type_complexity)]
    pub fn adam_update(
        &self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        m: &Self,
        v: &Self,
        vmax: Option<&Self>,
        s: &AdamScalars,
    ) -> Result<(Self, Self, Self, Option<Self>)> {
        let (p, g) = ((AnyRef::of(self), pl), (AnyRef::of(grad), gl));
        let state = [AnyRef::of(m), AnyRef::of(v)];
        let (np, nm, nv, nx) = adam_any(p, g, state, vmax.map(AnyRef::of), s)?;
        Ok((
            np.into_typed(),
            nm.into_typed(),
            nv.into_typed(),
            nx.map(AnyStorage::into_typed),
        ))
    }

    /// One fused SGD step; `buf` is the dense momentum buffer when momentum is on. Returns the
    /// new parameter (dense, in logical order) and the new buffer.
    pub fn sgd_update(
        &self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        buf: Option<&Self>,
        s: &SgdScalars,
    ) -> Result<(Self, Option<Self>)> {
        let (p, g) = ((AnyRef::of(self), pl), (AnyRef::of(grad), gl));
        let (np, nb) = sgd_any(p, g, buf.map(AnyRef::of), s)?;
        Ok((np.into_typed(), nb.map(AnyStorage::into_typed)))
    }
}

// The entry points with the element type erased: not generic, so compiled once, here (see
// `erased.rs`). They need no host intercept: the bodies' own host path (download, update,
// `Storage::from_vec` onto the parameter's device) already serves a registered backend.

/// A storage operand and its layout.
type Operand<'a> = (AnyRef<'a>, &'a Layout);

/// The new parameter, `m`, `v` and `vmax` of an Adam step.
type AdamOut = (AnyStorage, AnyStorage, AnyStorage, Option<AnyStorage>);

/// [`Storage::adam_update`] of any float type, erased: compiled once, here.
fn adam_any(
    p: Operand,
    g: Operand,
    [m, v]: [AnyRef; 2],
    vmax: Option<AnyRef>,
    s: &AdamScalars,
) -> Result<AdamOut> {
    /// The body, run on the concrete element type.
    struct Body<'a>(
        &'a Layout,
        Operand<'a>,
        [AnyRef<'a>; 2],
        Option<AnyRef<'a>>,
        &'a AdamScalars,
    );
    impl ForFloat for Body<'_> {
        type Out = Result<AdamOut>;
        fn run<F: Float>(self, p: &Storage<F>) -> Self::Out {
            let ((g, gl), [m, v], op) = (self.1, self.2, "adam");
            let x = self.3.map(|x| x.typed::<F>(op)).transpose()?;
            let (m, v) = (m.typed(op)?, v.typed(op)?);
            let (np, nm, nv, nx) =
                p.adam_update_body(self.0, (g.typed(op)?, gl), m, v, x, self.4)?;
            Ok((
                AnyStorage::from_typed(np),
                AnyStorage::from_typed(nm),
                AnyStorage::from_typed(nv),
                nx.map(AnyStorage::from_typed),
            ))
        }
    }
    p.0.floats("adam", Body(p.1, g, [m, v], vmax, s))
}

/// [`Storage::sgd_update`] of any float type, erased: compiled once, here.
fn sgd_any(
    p: Operand,
    g: Operand,
    buf: Option<AnyRef>,
    s: &SgdScalars,
) -> Result<(AnyStorage, Option<AnyStorage>)> {
    /// The body, run on the concrete element type.
    struct Body<'a>(&'a Layout, Operand<'a>, Option<AnyRef<'a>>, &'a SgdScalars);
    impl ForFloat for Body<'_> {
        type Out = Result<(AnyStorage, Option<AnyStorage>)>;
        fn run<F: Float>(self, p: &Storage<F>) -> Self::Out {
            let ((g, gl), op) = (self.1, "sgd");
            let b = self.2.map(|b| b.typed::<F>(op)).transpose()?;
            let (np, nb) = p.sgd_update_body(self.0, (g.typed(op)?, gl), b, self.3)?;
            Ok((AnyStorage::from_typed(np), nb.map(AnyStorage::from_typed)))
        }
    }
    p.0.floats("sgd", Body(p.1, g, buf, s))
}

/// [`Storage::adam_update_in_place`] of any float type, erased: compiled once, here. The
/// gradient, the one operand borrowed shared, picks the element type.
fn adam_in_place_any(
    (p, pl): (AnyMut, &Layout),
    g: Operand,
    [m, v]: [AnyMut; 2],
    vmax: Option<AnyMut>,
    s: &AdamScalars,
) -> Result<()> {
    /// The body, run on the concrete element type.
    struct Body<'a>(
        (AnyMut<'a>, &'a Layout),
        &'a Layout,
        [AnyMut<'a>; 2],
        Option<AnyMut<'a>>,
        &'a AdamScalars,
    );
    impl ForFloat for Body<'_> {
        type Out = Result<()>;
        fn run<F: Float>(self, g: &Storage<F>) -> Self::Out {
            let ((p, pl), [m, v], op) = (self.0, self.2, "adam");
            let x = self.3.map(|x| x.typed::<F>(op)).transpose()?;
            let (p, m, v) = (p.typed::<F>(op)?, m.typed(op)?, v.typed(op)?);
            p.adam_update_in_place_body(pl, (g, self.1), m, v, x, self.4)
        }
    }
    g.0.floats("adam", Body((p, pl), g.1, [m, v], vmax, s))
}

/// [`Storage::sgd_update_in_place`] of any float type, erased: compiled once, here. The
/// gradient, the one operand borrowed shared, picks the element type.
fn sgd_in_place_any(
    (p, pl): (AnyMut, &Layout),
    g: Operand,
    buf: Option<AnyMut>,
    s: &SgdScalars,
) -> Result<()> {
    /// The body, run on the concrete element type.
    struct Body<'a>(
        (AnyMut<'a>, &'a Layout),
        &'a Layout,
        Option<AnyMut<'a>>,
        &'a SgdScalars,
    );
    impl ForFloat for Body<'_> {
        type Out = Result<()>;
        fn run<F: Float>(self, g: &Storage<F>) -> Self::Out {
            let ((p, pl), op) = (self.0, "sgd");
            let b = self.2.map(|b| b.typed::<F>(op)).transpose()?;
            p.typed::<F>(op)?
                .sgd_update_in_place_body(pl, (g, self.1), b, self.3)
        }
    }
    g.0.floats("sgd", Body((p, pl), g.1, buf, s))
}

impl<E: Float> Storage<E> {
    /// The body of [`Storage::adam_update`] for one element type.
    #[allow(clippy::type_complexity)]
    fn adam_update_body(
        &self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        m: &Self,
        v: &Self,
        vmax: Option<&Self>,
        s: &AdamScalars,
    ) -> Result<(Self, Self, Self, Option<Self>)> {
        same_device("adam", self, grad)?;
        let n = pl.numel();
        if let Storage::Cuda(p) = self {
            let dev = self.device();
            let g = cuda_of("adam", dev, grad)?;
            let (m, v) = (cuda_of("adam", dev, m)?, cuda_of("adam", dev, v)?);
            let x = vmax.map(|x| cuda_of("adam", dev, x)).transpose()?;
            for len in [Some(m.len()), Some(v.len()), x.map(|x| x.len())]
                .into_iter()
                .flatten()
            {
                check_len("adam", len, n)?;
            }
            let (np, nm, nv, nx) = crate::cuda::ops_optim::adam((p, pl), (g, gl), (m, v, x), s)?;
            return Ok((
                Storage::Cuda(np),
                Storage::Cuda(nm),
                Storage::Cuda(nv),
                nx.map(Storage::Cuda),
            ));
        }
        // The CPU, and a registered backend on host copies.
        let (mut m, mut v) = (host_state("adam", m, n)?, host_state("adam", v, n)?);
        let mut vmax = vmax.map(|x| host_state("adam", x, n)).transpose()?;
        crate::dispatch::on_cpu(self.device());
        let mut p = self.try_to_vec(pl)?;
        let g = grad.try_to_vec(gl)?;
        optim::adam(&mut p, &g, &mut m, &mut v, vmax.as_deref_mut(), s);
        let dev = self.device();
        Ok((
            Storage::from_vec(p, dev)?,
            Storage::from_vec(m, dev)?,
            Storage::from_vec(v, dev)?,
            vmax.map(|x| Storage::from_vec(x, dev)).transpose()?,
        ))
    }

    /// The body of [`Storage::sgd_update`] for one element type.
    fn sgd_update_body(
        &self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        buf: Option<&Self>,
        s: &SgdScalars,
    ) -> Result<(Self, Option<Self>)> {
        same_device("sgd", self, grad)?;
        let n = pl.numel();
        if let Storage::Cuda(p) = self {
            let dev = self.device();
            let g = cuda_of("sgd", dev, grad)?;
            let b = buf.map(|b| cuda_of("sgd", dev, b)).transpose()?;
            if let Some(b) = b {
                check_len("sgd", b.len(), n)?;
            }
            let (np, nb) = crate::cuda::ops_optim::sgd((p, pl), (g, gl), b, s)?;
            return Ok((Storage::Cuda(np), nb.map(Storage::Cuda)));
        }
        // The CPU, and a registered backend on host copies.
        let mut buf = buf.map(|b| host_state("sgd", b, n)).transpose()?;
        crate::dispatch::on_cpu(self.device());
        let mut p = self.try_to_vec(pl)?;
        let g = grad.try_to_vec(gl)?;
        optim::sgd(&mut p, &g, buf.as_deref_mut(), s);
        let dev = self.device();
        Ok((
            Storage::from_vec(p, dev)?,
            buf.map(|b| Storage::from_vec(b, dev)).transpose()?,
        ))
    }
}

/// The viewed gradient as one host slice: borrowed when its layout is dense, else copied once
/// into logical order.
fn cpu_grad<'a, E: Float>(g: &'a [E], gl: &Layout) -> std::borrow::Cow<'a, [E]> {
    match gl.contiguous_range() {
        Some(r) => std::borrow::Cow::Borrowed(&g[r]),
        None => std::borrow::Cow::Owned(crate::cpu::elementwise::map(g, gl, |x| x)),
    }
}

/// Checks that a parameter updated in place is dense over all of its storage.
fn check_dense(op: &'static str, pl: &Layout, len: usize) -> Result<()> {
    if pl.contiguous_range() == Some(0..len) {
        Ok(())
    } else {
        Err(BackendError::BadArgument {
            op,
            msg: format!(
                "a parameter updated in place must be dense over its {len} elements, got layout {pl:?}"
            ),
        })
    }
}

impl<E: Float> Storage<E> {
    /// [`Storage::adam_update`] in place: `self` is the parameter, dense over all of its
    /// storage (`pl`), and it and the dense state `m`, `v` (and `vmax`) are overwritten with
    /// their new values in one pass, reading the gradient through its layout (a dense gradient
    /// is not copied). The caller guarantees that nothing else reads these buffers.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage, AdamScalars};
    /// let l = Layout::contiguous(&[2]);
    /// let mut p = Storage::from_vec(vec![1.0f32, -1.0], Device::Cpu).unwrap();
    /// let g = Storage::from_vec(vec![2.0f32, -2.0], Device::Cpu).unwrap();
    /// let (mut m, mut v) = (
    ///     Storage::from_vec(vec![0.0f32; 2], Device::Cpu).unwrap(),
    ///     Storage::from_vec(vec![0.0f32; 2], Device::Cpu).unwrap(),
    /// );
    /// // The first step of Adam with lr 0.1.
    /// let s = AdamScalars {
    ///     decay: 1.0,
    ///     l2: 0.0,
    ///     beta1: 0.9,
    ///     beta2: 0.999,
    ///     bias_correction2_sqrt: (1.0f64 - 0.999).sqrt(),
    ///     neg_step_size: -0.1 / (1.0 - 0.9),
    ///     eps: 1e-8,
    /// };
    /// p.adam_update_in_place(&l, (&g, &l), &mut m, &mut v, None, &s).unwrap();
    /// // Each weight moves by about lr against its gradient's sign.
    /// let p = p.to_vec(&l);
    /// assert!((p[0] - 0.9).abs() < 1e-6 && (p[1] + 0.9).abs() < 1e-6);
    /// assert!((m.to_vec(&l)[0] - 0.2).abs() < 1e-7);
    /// ```
    pub fn adam_update_in_place(
        &mut self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        m: &mut Self,
        v: &mut Self,
        vmax: Option<&mut Self>,
        s: &AdamScalars,
    ) -> Result<()> {
        let (p, g) = ((AnyMut::of(self), pl), (AnyRef::of(grad), gl));
        let state = [AnyMut::of(m), AnyMut::of(v)];
        adam_in_place_any(p, g, state, vmax.map(AnyMut::of), s)
    }

    /// The body of [`Storage::adam_update_in_place`] for one element type.
    fn adam_update_in_place_body(
        &mut self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        m: &mut Self,
        v: &mut Self,
        vmax: Option<&mut Self>,
        s: &AdamScalars,
    ) -> Result<()> {
        same_device("adam", self, grad)?;
        check_dense("adam", pl, self.len())?;
        let n = pl.numel();
        if gl.numel() != n {
            return Err(BackendError::BadArgument {
                op: "adam",
                msg: format!(
                    "gradient {:?} does not fit parameter {:?}",
                    gl.dims(),
                    pl.dims()
                ),
            });
        }
        match (&mut *self, grad, &mut *m, &mut *v) {
            (Storage::Cpu(p), Storage::Cpu(g), Storage::Cpu(m), Storage::Cpu(v)) => {
                check_len("adam", m.len(), n)?;
                check_len("adam", v.len(), n)?;
                let vmax = match vmax {
                    Some(Storage::Cpu(x)) => {
                        check_len("adam", x.len(), n)?;
                        Some(&mut x[..])
                    }
                    Some(x) => return Err(super::no_kernel("adam", x.device())),
                    None => None,
                };
                crate::dispatch::cpu();
                let g = cpu_grad(g, gl);
                optim::adam(p, &g, m, v, vmax, s);
                Ok(())
            }
            // Other devices run the out-of-place update and keep its results.
            _ => {
                let (np, nm, nv, nx) =
                    self.adam_update(pl, (grad, gl), m, v, vmax.as_deref(), s)?;
                *self = np;
                *m = nm;
                *v = nv;
                if let (Some(x), Some(nx)) = (vmax, nx) {
                    *x = nx;
                }
                Ok(())
            }
        }
    }

    /// [`Storage::sgd_update`] in place: `self` is the parameter, dense over all of its
    /// storage (`pl`), and it and the dense momentum buffer (when momentum is on) are
    /// overwritten in one pass, reading the gradient through its layout. The caller guarantees
    /// that nothing else reads these buffers.
    ///
    /// ```
    /// # use rtx_backends::{Device, Layout, Storage, SgdScalars};
    /// let l = Layout::contiguous(&[2]);
    /// let mut p = Storage::from_vec(vec![1.0f32, 2.0], Device::Cpu).unwrap();
    /// let g = Storage::from_vec(vec![0.5f32, -0.25], Device::Cpu).unwrap();
    /// let s = SgdScalars {
    ///     lr: 0.5,
    ///     momentum: 0.0,
    ///     dampening: 0.0,
    ///     weight_decay: 0.0,
    ///     nesterov: false,
    ///     first: true,
    /// };
    /// p.sgd_update_in_place(&l, (&g, &l), None, &s).unwrap();
    /// assert_eq!(p.to_vec(&l), vec![0.75, 2.125]);
    /// ```
    pub fn sgd_update_in_place(
        &mut self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        buf: Option<&mut Self>,
        s: &SgdScalars,
    ) -> Result<()> {
        let (p, g) = ((AnyMut::of(self), pl), (AnyRef::of(grad), gl));
        sgd_in_place_any(p, g, buf.map(AnyMut::of), s)
    }

    /// The body of [`Storage::sgd_update_in_place`] for one element type.
    fn sgd_update_in_place_body(
        &mut self,
        pl: &Layout,
        (grad, gl): (&Self, &Layout),
        buf: Option<&mut Self>,
        s: &SgdScalars,
    ) -> Result<()> {
        same_device("sgd", self, grad)?;
        check_dense("sgd", pl, self.len())?;
        let n = pl.numel();
        if gl.numel() != n {
            return Err(BackendError::BadArgument {
                op: "sgd",
                msg: format!(
                    "gradient {:?} does not fit parameter {:?}",
                    gl.dims(),
                    pl.dims()
                ),
            });
        }
        match (&mut *self, grad) {
            (Storage::Cpu(p), Storage::Cpu(g)) => {
                let buf = match buf {
                    Some(Storage::Cpu(b)) => {
                        check_len("sgd", b.len(), n)?;
                        Some(&mut b[..])
                    }
                    Some(b) => return Err(super::no_kernel("sgd", b.device())),
                    None => None,
                };
                crate::dispatch::cpu();
                let g = cpu_grad(g, gl);
                optim::sgd(p, &g, buf, s);
                Ok(())
            }
            _ => {
                let (np, nb) = self.sgd_update(pl, (grad, gl), buf.as_deref(), s)?;
                *self = np;
                if let (Some(b), Some(nb)) = (buf, nb) {
                    *b = nb;
                }
                Ok(())
            }
        }
    }
}
