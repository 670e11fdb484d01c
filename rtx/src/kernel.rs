//! Your own kernels on tensors, on any device: a function written with `#[kernel]` (see
//! [`macro@crate::kernel`]) is applied to tensors through its marker type `name::Op`. On the CPU
//! the kernel's native Rust runs; on a GPU its generated CUDA entry for the tensor's element
//! type, compiled by NVRTC on first use and cached on disk.
//!
//! - Elementwise kernels: [`map`] (also [`Tensor::map`]), [`map2`] and [`map3`], with
//!   broadcasting as for the built-in ops and `#[uniform]` values passed as `&[f64]` (a `T`
//!   uniform is rounded to the element type, an integer one must be integral). Gradients flow
//!   through the derivative kernels `#[kernel]` derives.
//! - Reduce kernels: [`Tensor::reduce_with`] along a typed axis.
//! - SIMT kernels: [`launch`] with a [`LaunchConfig`] over [`Arg`]s: input tensors, one or
//!   more output tensors written in place, and scalars.
//!
//! The arity of an elementwise kernel is checked when compiling (`map2` on a one-input kernel
//! does not compile); everything else that can go wrong (the number of uniforms, tensors on
//! different devices, a SIMT argument of the wrong kind) is an [`Error`](crate::Error) naming
//! the kernel.
//!
//! ```
//! use rtx::prelude::*;
//!
//! #[rtx::kernel(elementwise)]
//! fn lerp<T: Float>(a: T, b: T, #[uniform] t: T) -> T {
//!     a + t * (b - a)
//! }
//!
//! fn main() {
//!     let a: Tensor<Rank2<2, 2>> = Tensor::from_array([[0.0, 1.0], [2.0, 3.0]], Device::Cpu);
//!     let b: Tensor<Rank1<2>> = Tensor::from_array([10.0, 20.0], Device::Cpu); // broadcast
//!     let y = rtx::kernel::map2(lerp::Op, &a, &b, &[0.5]);
//!     assert_eq!(y.to_vec(), vec![5.0, 10.5, 6.0, 11.5]);
//! }
//! ```

use crate::error::{Result, ok};
use crate::shape::rules::BroadcastShapes;
use crate::shape::{Shape, describe};
use crate::tensor::Tensor;
use crate::tensor::kernel::{KernelOutput, apply_elementwise, broadcast_all};
use rtx_backends::storage::{SimtBuffer, launch_simt};
use rtx_backends::{Layout, Storage};
use rtx_kernels::Float;

pub use rtx_kernels::kernel::{
    Dim3, Elementwise, KernelSource, LaunchConfig, Reduce, Simt, TensorMap,
};

/// The shape of three broadcast operands.
pub type Broadcast3<A, B, C> = <<A as BroadcastShapes<B>>::Output as BroadcastShapes<C>>::Output;

/// Applies a one-input elementwise kernel to `x` ([`Tensor::map`] as a function).
///
/// ```
/// use rtx::prelude::*;
///
/// #[rtx::kernel(elementwise)]
/// fn square<T: Float>(x: T) -> T {
///     x * x
/// }
///
/// fn main() {
///     let x: Tensor<Rank1<2>> = Tensor::from_array([3.0, -2.0], Device::Cpu);
///     assert_eq!(rtx::kernel::map(square::Op, &x, &[]).to_vec(), vec![9.0, 4.0]);
/// }
/// ```
///
/// # Panics
/// When [`try_map`] fails.
#[track_caller]
pub fn map<K: Elementwise<1>, S: Shape, E: Float>(
    kernel: K,
    x: &Tensor<S, E>,
    uniforms: &[f64],
) -> Tensor<S, E> {
    x.map(kernel, uniforms)
}

/// [`map`], returning an error naming the kernel (see [`Tensor::try_map`]).
pub fn try_map<K: Elementwise<1>, S: Shape, E: Float>(
    kernel: K,
    x: &Tensor<S, E>,
    uniforms: &[f64],
) -> Result<Tensor<S, E>> {
    x.try_map(kernel, uniforms)
}

/// Applies a two-input elementwise kernel, broadcasting `a` and `b` as the built-in binary
/// ops do (the shorter shape must equal the trailing dims of the longer).
///
/// ```
/// use rtx::prelude::*;
///
/// #[rtx::kernel(elementwise)]
/// fn hypot<T: Float>(x: T, y: T) -> T {
///     (x * x + y * y).sqrt()
/// }
///
/// fn main() {
///     let x: Tensor<Rank1<2>> = Tensor::from_array([3.0, 5.0], Device::Cpu);
///     let y: Tensor<Rank1<2>> = Tensor::from_array([4.0, 12.0], Device::Cpu);
///     assert_eq!(rtx::kernel::map2(hypot::Op, &x, &y, &[]).to_vec(), vec![5.0, 13.0]);
/// }
/// ```
///
/// # Panics
/// When [`try_map2`] fails.
#[track_caller]
pub fn map2<K, A, B, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    uniforms: &[f64],
) -> Tensor<<A as BroadcastShapes<B>>::Output, E>
where
    K: Elementwise<2>,
    A: BroadcastShapes<B>,
    B: Shape,
    E: Float,
{
    ok(try_map2(kernel, a, b, uniforms))
}

/// [`map2`], returning an error naming the kernel: run-time dims that do not broadcast, the
/// wrong number of uniforms, tensors on different devices, or a device failure.
pub fn try_map2<K, A, B, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    uniforms: &[f64],
) -> Result<Tensor<<A as BroadcastShapes<B>>::Output, E>>
where
    K: Elementwise<2>,
    A: BroadcastShapes<B>,
    B: Shape,
    E: Float,
{
    let _ = kernel;
    let (dims, layouts) = broadcast_all(
        K::KERNEL.name,
        &[
            (a.layout(), describe(&a.shape())),
            (b.layout(), describe(&b.shape())),
        ],
    )?;
    let out = out_shape::<<A as BroadcastShapes<B>>::Output>(K::KERNEL.name, &dims)?;
    apply_elementwise::<K, 2, _, E>(
        vec![a.kernel_input(layouts[0]), b.kernel_input(layouts[1])],
        out,
        uniforms,
    )
}

/// Applies a three-input elementwise kernel, broadcasting all three to the longest shape.
///
/// ```
/// use rtx::prelude::*;
///
/// #[rtx::kernel(elementwise)]
/// fn fma<T: Float>(a: T, b: T, c: T) -> T {
///     a * b + c
/// }
///
/// fn main() {
///     let a: Tensor<Rank2<2, 2>> = Tensor::from_array([[1.0, 2.0], [3.0, 4.0]], Device::Cpu);
///     let b: Tensor<Rank1<2>> = Tensor::from_array([10.0, 100.0], Device::Cpu);
///     let c: Tensor<Rank0> = Tensor::full((), 0.5, Device::Cpu);
///     let y = rtx::kernel::map3(fma::Op, &a, &b, &c, &[]);
///     assert_eq!(y.to_vec(), vec![10.5, 200.5, 30.5, 400.5]);
/// }
/// ```
///
/// # Panics
/// When [`try_map3`] fails.
#[track_caller]
pub fn map3<K, A, B, C, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    c: &Tensor<C, E>,
    uniforms: &[f64],
) -> Tensor<Broadcast3<A, B, C>, E>
where
    K: Elementwise<3>,
    A: BroadcastShapes<B>,
    <A as BroadcastShapes<B>>::Output: BroadcastShapes<C>,
    B: Shape,
    C: Shape,
    E: Float,
{
    ok(try_map3(kernel, a, b, c, uniforms))
}

/// [`map3`], returning an error naming the kernel.
pub fn try_map3<K, A, B, C, E>(
    kernel: K,
    a: &Tensor<A, E>,
    b: &Tensor<B, E>,
    c: &Tensor<C, E>,
    uniforms: &[f64],
) -> Result<Tensor<Broadcast3<A, B, C>, E>>
where
    K: Elementwise<3>,
    A: BroadcastShapes<B>,
    <A as BroadcastShapes<B>>::Output: BroadcastShapes<C>,
    B: Shape,
    C: Shape,
    E: Float,
{
    let _ = kernel;
    let (dims, layouts) = broadcast_all(
        K::KERNEL.name,
        &[
            (a.layout(), describe(&a.shape())),
            (b.layout(), describe(&b.shape())),
            (c.layout(), describe(&c.shape())),
        ],
    )?;
    let out = out_shape::<Broadcast3<A, B, C>>(K::KERNEL.name, &dims)?;
    apply_elementwise::<K, 3, _, E>(
        vec![
            a.kernel_input(layouts[0]),
            b.kernel_input(layouts[1]),
            c.kernel_input(layouts[2]),
        ],
        out,
        uniforms,
    )
}

/// The output shape type from broadcast sizes.
fn out_shape<O: Shape>(kernel: &'static str, dims: &[usize]) -> Result<O> {
    O::from_dims(dims).ok_or_else(|| crate::Error::BadArgument {
        op: kernel,
        msg: format!("the broadcast sizes {dims:?} do not fit the output's shape type"),
    })
}

/// One argument of a SIMT [`launch`], matching one parameter of the kernel: a tensor it reads
/// (`&[T]`), a tensor it writes (`&mut [T]`), or a scalar.
pub struct Arg<'a, E: Float>(ArgKind<'a, E>);

enum ArgKind<'a, E: Float> {
    In(&'a Storage<E>, &'a Layout),
    Out(&'a mut dyn KernelOutput<E>),
    Elem(E),
    Usize(usize),
    I32(i32),
    U32(u32),
    I64(i64),
    TensorMap(&'a Storage<E>, &'a Layout, u32),
    Words(&'a Storage<i32>, &'a Layout),
}

impl<'a, E: Float> Arg<'a, E> {
    /// A tensor for a `&[T]` parameter: the kernel sees its elements dense and row-major (a
    /// view is copied first).
    pub fn input<S: Shape>(t: &'a Tensor<S, E>) -> Self {
        Arg(ArgKind::In(t.storage(), t.layout()))
    }

    /// A tensor for a `&mut [T]` parameter, written in place: the kernel sees its current
    /// elements dense and row-major. A view, or a tensor whose storage another tensor shares,
    /// is first replaced by a dense copy of its own, so the write shows only through this
    /// tensor. A tensor that records gradients is an error at launch.
    pub fn output<S: Shape>(t: &'a mut Tensor<S, E>) -> Self {
        Arg(ArgKind::Out(t))
    }

    /// A value for a `T` parameter.
    pub fn elem(v: E) -> Self {
        Arg(ArgKind::Elem(v))
    }

    /// A value for a `usize` parameter.
    pub fn usize(v: usize) -> Self {
        Arg(ArgKind::Usize(v))
    }

    /// A value for an `i32` parameter.
    pub fn i32(v: i32) -> Self {
        Arg(ArgKind::I32(v))
    }

    /// A value for a `u32` parameter.
    pub fn u32(v: u32) -> Self {
        Arg(ArgKind::U32(v))
    }

    /// A value for an `i64` parameter.
    pub fn i64(v: i64) -> Self {
        Arg(ArgKind::I64(v))
    }

    /// A dense tensor of `i32` words for a `&[i32]` parameter: packed data a kernel decodes
    /// itself, such as a quantized weight's blocks ([`crate::quant::QTensor::words`]). A view
    /// is an error at launch (words are not elements to gather).
    pub fn words<S: Shape>(t: &'a Tensor<S, i32>) -> Self {
        Arg(ArgKind::Words(t.storage(), t.layout()))
    }

    /// A [`TensorMap`] parameter over `t`, a dense 2-D tensor of f16 or bf16 whose rows are
    /// whole 16-byte units, copied by `tma_load_2d` in boxes of `box_rows` rows by 64
    /// elements. `t` must be the tensor passed for the buffer the kernel's `tma_load_2d`
    /// names: natively the kernel copies from that buffer, on a GPU from the map's address.
    /// Its shape is checked at launch.
    pub fn tensor_map<S: Shape>(t: &'a Tensor<S, E>, box_rows: u32) -> Self {
        Arg(ArgKind::TensorMap(t.storage(), t.layout(), box_rows))
    }
}

/// The [`TensorMap`] of `box_rows`-row boxes over a tensor of layout `l`, for kernel `name`.
fn tensor_map_of(name: &'static str, l: &Layout, box_rows: u32) -> Result<TensorMap> {
    let bad = |msg: String| crate::Error::BadArgument { op: name, msg };
    match (l.dims(), l.contiguous_range()) {
        (&[rows, cols], Some(_)) => {
            TensorMap::new(rows, cols, cols, box_rows).map_err(|e| bad(e.message().to_string()))
        }
        (dims, _) => Err(bad(format!(
            "a tensor map views a dense 2-D tensor; this one has dims {dims:?}{}",
            if l.is_contiguous() {
                ""
            } else {
                " and is a strided view (make it contiguous first)"
            }
        ))),
    }
}

/// Launches a SIMT kernel (its marker `name::Op`) with a grid and block, over `args`, one per
/// kernel parameter in order. The tensors decide the device: on the CPU the kernel runs on
/// the block emulation (every index checked), on a GPU its CUDA entry for `E` is launched on
/// the GPU's stream. All tensors must be on one device.
///
/// ```
/// use rtx::kernel::{Arg, LaunchConfig};
/// use rtx::prelude::*;
///
/// #[rtx::kernel]
/// fn add_one<T: Float>(x: &[T], out: &mut [T], n: usize) {
///     let i = block_idx_x() * block_dim_x() + thread_idx_x();
///     if i < n {
///         out[i] = x[i] + 1.0;
///     }
/// }
///
/// fn main() -> rtx::Result<()> {
///     let x: Tensor<Rank1<5>> = Tensor::from_array([1.0, 2.0, 3.0, 4.0, 5.0], Device::Cpu);
///     let mut y: Tensor<Rank1<5>> = Tensor::zeros((Const,), Device::Cpu);
///     let cfg = LaunchConfig::new(2, 4);
///     // SAFETY: the kernel touches only indices below `n`, the length of both tensors.
///     let mut args = [Arg::input(&x), Arg::output(&mut y), Arg::usize(5)];
///     unsafe { rtx::kernel::launch(add_one::Op, cfg, &mut args)? };
///     assert_eq!(y.to_vec(), vec![2.0, 3.0, 4.0, 5.0, 6.0]);
///     Ok(())
/// }
/// ```
///
/// # Safety
/// On a GPU the kernel must read and write only inside the buffers it is given: the launch
/// cannot check a kernel's indexing, and an access outside them reads or corrupts other
/// device memory. The CPU emulation checks every index (an error or a panic naming the
/// index), so run a kernel there first.
///
/// # Errors
/// An argument of the wrong kind or count for the kernel's parameters, tensors on different
/// devices, a block of more than 1024 threads, an output tensor that records gradients, or
/// a device failure: each names the kernel.
pub unsafe fn launch<K: Simt, E: Float>(
    kernel: K,
    config: LaunchConfig,
    args: &mut [Arg<'_, E>],
) -> Result<()> {
    let _ = kernel;
    let name = K::KERNEL.name;
    if let Some(d) = args.iter().find_map(|a| match &a.0 {
        ArgKind::Out(o) => Some(o.device()),
        _ => None,
    }) && let Some(other) = args.iter().find_map(|a| match &a.0 {
        ArgKind::In(s, _) if s.device() != d => Some(s.device()),
        ArgKind::Words(s, _) if s.device() != d => Some(s.device()),
        _ => None,
    }) {
        return Err(rtx_backends::BackendError::DeviceMismatch {
            op: name,
            lhs: d,
            rhs: other,
        }
        .into());
    }
    // Inputs that are views are made dense first; the copies live until the launch is queued.
    let mut dense: Vec<Option<Storage<E>>> = Vec::with_capacity(args.len());
    for a in args.iter() {
        dense.push(match &a.0 {
            ArgKind::In(s, l) if l.contiguous_range().is_none() => Some(s.contiguous(l)?),
            _ => None,
        });
    }
    let mut buffers: Vec<SimtBuffer<'_, E>> = Vec::with_capacity(args.len());
    for (a, copy) in args.iter_mut().zip(&dense) {
        buffers.push(match &mut a.0 {
            ArgKind::In(s, l) => match (copy, l.contiguous_range()) {
                (Some(d), _) => SimtBuffer::In(d, 0..d.len()),
                (None, Some(r)) => SimtBuffer::In(*s, r),
                (None, None) => SimtBuffer::In(*s, 0..0),
            },
            ArgKind::Out(o) => SimtBuffer::Out(o.writable(name)?),
            ArgKind::Elem(v) => SimtBuffer::Elem(*v),
            ArgKind::Usize(v) => SimtBuffer::Usize(*v),
            ArgKind::I32(v) => SimtBuffer::I32(*v),
            ArgKind::U32(v) => SimtBuffer::U32(*v),
            ArgKind::I64(v) => SimtBuffer::I64(*v),
            ArgKind::Words(s, l) => match l.contiguous_range() {
                Some(r) => SimtBuffer::Words(s, r),
                None => {
                    return Err(crate::Error::BadArgument {
                        op: name,
                        msg: format!(
                            "a buffer of words must be dense; this one is a view of dims {:?}",
                            l.dims()
                        ),
                    });
                }
            },
            ArgKind::TensorMap(s, l, box_rows) => {
                let map = tensor_map_of(name, l, *box_rows)?;
                let range = l.contiguous_range().unwrap_or(0..0);
                SimtBuffer::TensorMap(map, *s, range)
            }
        });
    }
    // SAFETY: outputs are dense storage held alone (`writable`); staying inside the buffers
    // is the caller's promise.
    unsafe { launch_simt(K::KERNEL, K::run::<E>, config, &mut buffers)? };
    Ok(())
}
