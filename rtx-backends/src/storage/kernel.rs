//! Backend entry points for kernels users write with `#[kernel]` and apply through
//! `rtx::kernel`: an elementwise kernel over broadcast inputs, a reduction along one axis, and
//! a SIMT launch over dense buffers. The CPU runs the kernel's native code; a GPU runs the
//! entry of the kernel's generated CUDA source for the element type.
//!
//! Invariant: both devices get the same values: uniforms are rounded to the element type
//! before either sees them, and a SIMT launch's arguments are checked against the entry's
//! parameter list (count and kind) before anything runs.

use super::Storage;
use crate::cuda::ops::{self as gpu, input};
use crate::cuda::{self, Arg};
use crate::{BackendError, Device, Layout, Result};
use rtx_kernels::kernel::{
    KernelSource, LaunchConfig, LaunchError, ParamType, ScalarType, SimtArg, TensorMap, Variant,
    elementwise_uniforms,
};
use rtx_kernels::{Element, Float};
use std::ops::Range;

/// A native SIMT run: the `run` of a `#[kernel]`'s `Simt` marker.
pub type SimtNative<E> =
    fn(LaunchConfig, &mut [SimtArg<'_, E>]) -> std::result::Result<(), LaunchError>;

/// A native reduction: the `run` of a `#[kernel(reduce)]`'s `Reduce` marker, over `(x, outer,
/// axis, inner, out)`.
pub type ReduceNative<E> =
    fn(&[E], usize, usize, usize, &mut [E]) -> std::result::Result<(), LaunchError>;

/// A native kernel's error as the backend's, naming the kernel.
fn launch_err(kernel: &'static str, e: LaunchError) -> BackendError {
    BackendError::BadArgument {
        op: kernel,
        msg: e.message().to_string(),
    }
}

/// The device of every storage in `all`, or the first mismatch, naming the kernel.
fn one_device<'a, E: Element + 'a>(
    kernel: &'static str,
    all: impl IntoIterator<Item = &'a Storage<E>>,
) -> Result<Option<Device>> {
    let mut found: Option<Device> = None;
    for s in all {
        match found {
            None => found = Some(s.device()),
            Some(d) if d != s.device() => {
                return Err(BackendError::DeviceMismatch {
                    op: kernel,
                    lhs: d,
                    rhs: s.device(),
                });
            }
            Some(_) => {}
        }
    }
    Ok(found)
}

/// An elementwise kernel's CPU loop over its inputs (host slices and their layouts).
type CpuLoop<'a, E> = dyn Fn(&[(&[E], &Layout)]) -> Vec<E> + 'a;

impl<E: Float> Storage<E> {
    /// Applies the elementwise kernel `src` to its `N` inputs, whose layouts are already
    /// broadcast to the same sizes: `native` on the CPU (one element of each input in, in
    /// order), the kernel's entry for `E` on a GPU. `uniforms` are the `#[uniform]` values in
    /// order; `T` ones are rounded to `E` first, so both devices see the same value. `N` is a
    /// constant so that the CPU loop is compiled for exactly that many inputs.
    pub fn map_kernel<const N: usize>(
        src: &'static KernelSource,
        inputs: &[(&Storage<E>, &Layout)],
        uniforms: &[f64],
        native: impl Fn(&[E]) -> E + Sync,
    ) -> Result<Self> {
        let cpu = |slices: &[(&[E], &Layout)]| {
            crate::cpu::elementwise::zip_n_map::<N, 0, _, _>(slices, &native)
        };
        Self::map_kernel_with(src, N, inputs, uniforms, &cpu)
    }

    /// [`Storage::map_kernel`] for a derivative kernel: the `N` inputs of the kernel it was
    /// derived from, then the upstream gradient (`N + 1` inputs in all).
    pub fn map_kernel_grad<const N: usize>(
        src: &'static KernelSource,
        inputs: &[(&Storage<E>, &Layout)],
        uniforms: &[f64],
        native: impl Fn(&[E]) -> E + Sync,
    ) -> Result<Self> {
        let cpu = |slices: &[(&[E], &Layout)]| {
            crate::cpu::elementwise::zip_n_map::<N, 1, _, _>(slices, &native)
        };
        Self::map_kernel_with(src, N + 1, inputs, uniforms, &cpu)
    }

    /// [`Storage::map_kernel`] with the CPU loop as a `&dyn`: only the loop is compiled per
    /// kernel, the checks and the launch once per element type.
    fn map_kernel_with(
        src: &'static KernelSource,
        count: usize,
        inputs: &[(&Storage<E>, &Layout)],
        uniforms: &[f64],
        cpu: &CpuLoop<'_, E>,
    ) -> Result<Self> {
        let Some(&(first, first_l)) = inputs.first() else {
            return Err(BackendError::BadArgument {
                op: src.name,
                msg: "an elementwise kernel needs at least one input".into(),
            });
        };
        if inputs.len() != count {
            return Err(BackendError::BadArgument {
                op: src.name,
                msg: format!("{} inputs given to a kernel of {count}", inputs.len()),
            });
        }
        let dims = first_l.dims();
        if let Some((_, l)) = inputs.iter().find(|(_, l)| l.dims() != dims) {
            return Err(BackendError::BadArgument {
                op: src.name,
                msg: format!(
                    "inputs of sizes {dims:?} and {:?}: they must be broadcast to the same \
                     sizes first",
                    l.dims()
                ),
            });
        }
        one_device(src.name, inputs.iter().map(|(s, _)| *s))?;
        crate::dispatch::on_cpu(first.device());
        match first {
            Storage::Cpu(_) => {
                let slices: Vec<(&[E], &Layout)> = inputs
                    .iter()
                    .filter_map(|(s, l)| s.as_cpu_slice().map(|v| (v, *l)))
                    .collect();
                Ok(Storage::Cpu(cpu(&slices)))
            }
            Storage::Cuda(c) => {
                let ins: Vec<_> = inputs
                    .iter()
                    .filter_map(|(s, l)| match s {
                        Storage::Cuda(c) => Some(input(c, l)),
                        Storage::Cpu(_) | Storage::Backend(_) => None,
                    })
                    .collect();
                let params = elementwise_uniforms(src);
                let rounded: Vec<f64> = uniforms
                    .iter()
                    .enumerate()
                    .map(|(i, &u)| match params.get(i).map(|p| p.ty) {
                        Some(ParamType::Value(ScalarType::Acc)) => E::from_f64(u).to_f64(),
                        _ => u,
                    })
                    .collect();
                Ok(Storage::Cuda(gpu::map(
                    c.ordinal(),
                    src,
                    E::DTYPE,
                    dims,
                    &ins,
                    &rounded,
                )?))
            }
            // A registered backend runs the kernel's native code on host copies.
            Storage::Backend(b) => {
                let hosts = inputs
                    .iter()
                    .map(|(s, _)| s.try_to_vec(&Layout::contiguous(&[s.len()])))
                    .collect::<Result<Vec<_>>>()?;
                let slices: Vec<(&[E], &Layout)> = hosts
                    .iter()
                    .zip(inputs)
                    .map(|(v, (_, l))| (v.as_slice(), *l))
                    .collect();
                Storage::from_vec(cpu(&slices), b.device())
            }
        }
    }

    /// Reduces `axis` of a view with the reduce kernel `src`: `native` over the dense elements
    /// on the CPU, the kernel's entry on a GPU. The result has the axis removed.
    pub fn reduce_kernel(
        &self,
        l: &Layout,
        axis: usize,
        src: &'static KernelSource,
        native: ReduceNative<E>,
    ) -> Result<Self> {
        if axis >= l.rank() {
            return Err(BackendError::BadArgument {
                op: src.name,
                msg: format!("axis {axis} is out of range for sizes {:?}", l.dims()),
            });
        }
        crate::dispatch::on_cpu(self.device());
        match self {
            Storage::Cpu(v) => {
                let dense: std::borrow::Cow<'_, [E]> = match l.contiguous_range() {
                    Some(r) => std::borrow::Cow::Borrowed(&v[r]),
                    None => std::borrow::Cow::Owned(crate::cpu::elementwise::map(v, l, |x| x)),
                };
                let dims = l.dims();
                let outer: usize = dims[..axis].iter().product();
                let inner: usize = dims[axis + 1..].iter().product();
                let mut out = vec![E::default(); outer * inner];
                native(&dense, outer, dims[axis], inner, &mut out)
                    .map_err(|e| launch_err(src.name, e))?;
                Ok(Storage::Cpu(out))
            }
            Storage::Cuda(c) => Ok(Storage::Cuda(gpu::reduce(c, l, axis, src)?)),
            // A registered backend runs the native reduction on a host copy.
            Storage::Backend(b) => {
                let host = Storage::Cpu(self.try_to_vec(&Layout::contiguous(&[self.len()]))?);
                let out = host.reduce_kernel(l, axis, src, native)?;
                out.to_device(&Layout::contiguous(&[out.len()]), b.device())
            }
        }
    }
}

/// One argument of a SIMT launch over storage ([`launch_simt`]).
#[derive(Debug)]
pub enum SimtBuffer<'a, E> {
    /// A read-only buffer: the dense elements `range` of a storage.
    In(&'a Storage<E>, Range<usize>),
    /// A buffer the kernel writes: a whole storage that no other handle shares.
    Out(&'a mut Storage<E>),
    /// A `T` scalar.
    Elem(E),
    /// A `usize` scalar.
    Usize(usize),
    /// An `i32` scalar.
    I32(i32),
    /// A `u32` scalar.
    U32(u32),
    /// An `i64` scalar.
    I64(i64),
    /// A `TensorMap` parameter: the view of the dense elements `range` of a storage (the
    /// buffer a `tma_load_2d` of the kernel names).
    TensorMap(TensorMap, &'a Storage<E>, Range<usize>),
    /// A read-only `&[i32]` buffer (a quantized weight's words): the dense elements `range`
    /// of a storage of words.
    Words(&'a Storage<i32>, Range<usize>),
}

impl<E> SimtBuffer<'_, E> {
    fn storage_device(&self) -> Option<Device>
    where
        E: Element,
    {
        match self {
            SimtBuffer::In(s, _) => Some(s.device()),
            SimtBuffer::Out(s) => Some(s.device()),
            SimtBuffer::TensorMap(_, s, _) => Some(s.device()),
            SimtBuffer::Words(s, _) => Some(s.device()),
            _ => None,
        }
    }
}

/// Launches the SIMT kernel `src` with `config` over `args` (one per kernel parameter, in
/// order): `native` (the block emulation) on the CPU, the kernel's entry for `E` on a GPU.
/// Every buffer must live on the same device.
///
/// # Safety
/// On a GPU the kernel must read and write only inside the buffers it is given (the launch
/// cannot check its indexing; the CPU emulation does, so run a kernel there first). `Out`
/// storage must not be shared with another handle (see [`writable_in_place`]).
pub unsafe fn launch_simt<E: Float>(
    src: &'static KernelSource,
    native: SimtNative<E>,
    config: LaunchConfig,
    args: &mut [SimtBuffer<'_, E>],
) -> Result<()> {
    let mut device = None;
    for d in args.iter().filter_map(|a| a.storage_device()) {
        match device {
            None => device = Some(d),
            Some(first) if first != d => {
                return Err(BackendError::DeviceMismatch {
                    op: src.name,
                    lhs: first,
                    rhs: d,
                });
            }
            Some(_) => {}
        }
    }
    let device = device.ok_or_else(|| BackendError::BadArgument {
        op: src.name,
        msg: "a SIMT launch needs at least one tensor buffer (it says which device runs it)".into(),
    })?;
    let threads = config.block.count();
    if threads == 0 || threads > 1024 || config.grid.count() == 0 {
        return Err(BackendError::BadArgument {
            op: src.name,
            msg: format!(
                "launch of grid {:?} and block {:?}: a block holds 1 to 1024 threads and the \
                 grid at least one block",
                config.grid, config.block
            ),
        });
    }
    crate::dispatch::on_cpu(device);
    match device {
        Device::Cpu => {
            let mut native_args: Vec<SimtArg<'_, E>> = Vec::with_capacity(args.len());
            for a in args.iter_mut() {
                native_args.push(match a {
                    SimtBuffer::In(Storage::Cpu(v), r) => SimtArg::In(&v[r.clone()]),
                    SimtBuffer::Out(Storage::Cpu(v)) => SimtArg::Out(&mut v[..]),
                    SimtBuffer::Elem(x) => SimtArg::Elem(*x),
                    SimtBuffer::Usize(x) => SimtArg::Usize(*x),
                    SimtBuffer::I32(x) => SimtArg::I32(*x),
                    SimtBuffer::U32(x) => SimtArg::U32(*x),
                    SimtBuffer::I64(x) => SimtArg::I64(*x),
                    SimtBuffer::TensorMap(m, ..) => SimtArg::TensorMap(*m),
                    SimtBuffer::Words(Storage::Cpu(v), r) => SimtArg::Words(&v[r.clone()]),
                    _ => return Err(super::no_kernel(src.name, device)),
                });
            }
            native(config, &mut native_args).map_err(|e| launch_err(src.name, e))
        }
        // SIMT kernels write their outputs in place, which host copies would not carry back.
        Device::Backend(_) => Err(super::no_kernel(src.name, device)),
        Device::Cuda(ordinal) => {
            let entry = cuda::kernel_entry(ordinal, src, E::DTYPE, E::DTYPE, Variant::Simt)?;
            if entry.params.len() != args.len() {
                let names: Vec<&str> = entry.params.iter().map(|p| p.name).collect();
                return Err(launch_err(
                    src.name,
                    rtx_kernels::kernel::simt_arity(src.name, &names, args.len()),
                ));
            }
            let mut launch_args = Vec::with_capacity(args.len());
            for (p, a) in entry.params.iter().zip(args.iter()) {
                let arg = match (p.ty, a) {
                    (
                        ParamType::Ptr { mutable: false, .. },
                        SimtBuffer::In(Storage::Cuda(c), r),
                    ) => Arg::Ptr(c.ptr_at(r.start)),
                    (ParamType::Ptr { .. }, SimtBuffer::Out(Storage::Cuda(c))) => {
                        Arg::Ptr(c.device_ptr())
                    }
                    (ParamType::Value(ScalarType::Acc), SimtBuffer::Elem(x)) => {
                        Arg::Acc(x.to_f64())
                    }
                    (ParamType::Value(ScalarType::U64), SimtBuffer::Usize(x)) => {
                        Arg::U64(*x as u64)
                    }
                    (ParamType::Value(ScalarType::I32), SimtBuffer::I32(x)) => Arg::I32(*x),
                    (ParamType::Value(ScalarType::U32), SimtBuffer::U32(x)) => Arg::U32(*x),
                    (ParamType::Value(ScalarType::I64), SimtBuffer::I64(x)) => Arg::I64(*x),
                    (
                        ParamType::Ptr {
                            elem: ScalarType::I32,
                            mutable: false,
                        },
                        SimtBuffer::Words(Storage::Cuda(c), r),
                    ) => Arg::Ptr(c.ptr_at(r.start)),
                    (ParamType::TensorMap, SimtBuffer::TensorMap(m, Storage::Cuda(c), r)) => {
                        Arg::TensorMap(*m, c.ptr_at(r.start))
                    }
                    (want, got) => {
                        return Err(BackendError::BadArgument {
                            op: src.name,
                            msg: format!(
                                "parameter `{}` is {want:?}, the argument given is {}",
                                p.name,
                                describe(got)
                            ),
                        });
                    }
                };
                launch_args.push(arg);
            }
            let cfg = cuda::LaunchConfig {
                grid: (config.grid.x, config.grid.y, config.grid.z),
                block: (config.block.x, config.block.y, config.block.z),
                shared_mem: 0,
            };
            // SAFETY: the arguments match the entry's parameters (checked above and again by
            // `launch_entry`); that the kernel stays inside its buffers is the caller's promise.
            unsafe { cuda::launch_entry(ordinal, src, entry, cfg, &launch_args) }
        }
    }
}

fn describe<E>(a: &SimtBuffer<'_, E>) -> &'static str {
    match a {
        SimtBuffer::In(..) => "an input buffer",
        SimtBuffer::Out(_) => "an output buffer",
        SimtBuffer::Elem(_) => "a T scalar",
        SimtBuffer::Usize(_) => "a usize",
        SimtBuffer::I32(_) => "an i32",
        SimtBuffer::U32(_) => "a u32",
        SimtBuffer::I64(_) => "an i64",
        SimtBuffer::TensorMap(..) => "a tensor map",
        SimtBuffer::Words(..) => "a buffer of words",
    }
}

/// Whether a kernel may write `s` in place: host memory held alone by the caller always can,
/// GPU memory unless a clone of the storage shares its buffer.
pub fn writable_in_place<E: Element>(s: &Storage<E>) -> bool {
    match s {
        Storage::Cpu(_) => true,
        Storage::Cuda(c) => !c.is_shared(),
        // Its buffers may be shared between storages: never written in place.
        Storage::Backend(_) => false,
    }
}
