//! The kernel ABI: what `#[kernel]` generates besides native code, namely a [`KernelSource`]
//! per kernel (its CUDA C source and the exact argument list of every entry point), the
//! `#[repr(C)]` structs passed to strided entries, and the launch shape of native SIMT runs.
//!
//! Invariant: a [`KernelEntry`]'s `params` list is exactly the argument list of its
//! `extern "C"` symbol in `source`, in order, so a launcher can marshal arguments from the
//! descriptor alone. The source is self-contained: it includes no header (NVRTC finds none by
//! itself), so f16 and bf16 travel as 16-bit bit patterns converted in the source itself.
//!
//! ```
//! use rtx_kernels::kernel::{Variant, ParamType, ScalarType};
//! use rtx_kernels::{kernels::gelu_tanh, DType};
//! let entry = gelu_tanh::KERNEL.entry(DType::F16, Variant::Contiguous).unwrap();
//! assert_eq!(entry.symbol, "gelu_tanh_contig_f16");
//! assert_eq!(entry.params[0].ty, ParamType::Ptr { elem: ScalarType::Elem, mutable: false });
//! ```

#[doc(hidden)]
pub mod block;
mod ops;
#[doc(hidden)]
pub mod rt;
mod scalar;
#[doc(hidden)]
pub mod tensor_core;
#[doc(hidden)]
pub mod tma;

pub use block::{Dim3, LaunchConfig};
pub use ops::{
    Elementwise, Reduce, Simt, SimtArg, elementwise_inputs, elementwise_uniforms, simt_arity,
    simt_unsupported,
};
pub use scalar::{KernelElem, KernelNum, KernelScalar};
pub use tma::{TMA_BOX_ROW_BYTES, TensorMap};

use crate::DType;
use std::fmt;

/// One kernel produced by `#[kernel]`: its name, kind, CUDA source and entry points.
#[derive(Debug)]
pub struct KernelSource {
    /// The Rust function's name (`gelu_tanh`).
    pub name: &'static str,
    /// Which of the three kinds it is.
    pub kind: KernelKind,
    /// Self-contained CUDA C++ source holding every entry point; compile it with NVRTC.
    pub source: &'static str,
    /// One `extern "C" __global__` function per element type and variant.
    pub entries: &'static [KernelEntry],
}

impl KernelSource {
    /// The entry point for an element type and variant, if the kernel has one.
    ///
    /// ```
    /// use rtx_kernels::{kernels::sum, kernel::Variant, DType};
    /// assert_eq!(sum::KERNEL.entry(DType::F64, Variant::Reduce).unwrap().symbol, "sum_f64");
    /// assert!(sum::KERNEL.entry(DType::Bool, Variant::Reduce).is_none());
    /// ```
    pub fn entry(&self, dtype: DType, variant: Variant) -> Option<&'static KernelEntry> {
        self.entries
            .iter()
            .find(|e| e.dtype == dtype && e.variant == variant)
    }

    /// The entry point reading `dtype` and writing `out`: how a kernel with a second type
    /// parameter (a cast) or a `bool` result is picked.
    ///
    /// ```
    /// use rtx_kernels::{kernels::{cast, lt}, kernel::Variant, DType};
    /// let e = cast::KERNEL.entry_to(DType::F32, DType::BF16, Variant::Strided).unwrap();
    /// assert_eq!(e.symbol, "cast_strided_f32_to_bf16");
    /// assert!(lt::KERNEL.entry_to(DType::F16, DType::Bool, Variant::Contiguous).is_some());
    /// ```
    pub fn entry_to(
        &self,
        dtype: DType,
        out: DType,
        variant: Variant,
    ) -> Option<&'static KernelEntry> {
        self.entries
            .iter()
            .find(|e| e.dtype == dtype && e.out_dtype == out && e.variant == variant)
    }
}

/// The three kinds of kernel `#[kernel]` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// A scalar function mapped over tensors; `inputs` tensor arguments, one output.
    Elementwise {
        /// Number of tensor inputs (uniform scalars not counted).
        inputs: usize,
        /// Whether the strided entries take vector launches ([`KernelShape::vectors`]).
        vectors: bool,
    },
    /// A reduction along one axis of a contiguous tensor seen as `(outer, axis, inner)`.
    Reduce,
    /// General SIMT code launched with a grid and block chosen by the caller.
    Simt {
        /// Whether the body calls `sync_threads` or a warp shuffle.
        uses_sync: bool,
        /// Bytes of shared memory a block takes at launch (0 when its shared arrays fit the
        /// 48 KiB a GPU kernel may declare statically, as most do). Past that, `#[kernel]`
        /// carves the arrays out of one dynamic allocation of this size, and the launcher
        /// raises the function's limit to it.
        dynamic_shared: u32,
        /// Whether the body calls `grid_sync`: a GPU launches it cooperatively (every block
        /// resident at once, or the launch fails), and the emulation runs its blocks together.
        grid_sync: bool,
    },
}

/// Which code path an entry point implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Elementwise over contiguous, equally long buffers (vectorized 16-byte loads when every
    /// pointer is 16-byte aligned, a scalar loop for the tail).
    Contiguous,
    /// Elementwise with per-input strides over the output's shape (broadcasting is a zero
    /// stride); the output is contiguous.
    Strided,
    /// A reduction: one block per output element; the block size must be a multiple of 32 and
    /// at most 1024.
    Reduce,
    /// A reduction like [`Variant::Reduce`] (same arguments) with the threads of a warp on
    /// neighbouring elements of the contiguous `inner` dim, so reads along a middle axis are
    /// coalesced: blocks of 32 x `y` threads (`y` at most 32 splits the axis), a grid of
    /// `ceil(inner / 32)` x up to `outer` blocks.
    ReduceColumns,
    /// Stage 1 of a reduction over long rows (`outer = rows`, `inner = 1`): block `(b, r)`
    /// combines elements `[b * chunk, (b + 1) * chunk)` of row `r` (rows of `n` elements) into
    /// partial result `r * gridDim.x + b`, in the compute type; `chunk` a multiple of 16.
    ReducePartial,
    /// Stage 2: block `r` combines the `parts` partial results of row `r` and writes output
    /// `r`, applying the reduction's `finish` with the row length `n`.
    ReduceFinal,
    /// A reduction like [`Variant::Reduce`] (same arguments) with a warp per output, for
    /// short rows: warp `w` of block `b` reduces outputs `b * warps + w`, stepping by the
    /// grid's warps; the block size is a multiple of 32, at most 1024.
    ReduceRows,
    /// Stage 1 of a column reduction split along the axis: launched like
    /// [`Variant::ReduceColumns`] with `gridDim.z` chunks of `chunk` elements of the axis,
    /// block `(bx, o, z)` writes its columns' partial results, in the compute type, to
    /// `partial[(o * gridDim.z + z) * inner + i]`.
    ReduceColumnsPartial,
    /// Stage 2: output `(o, i)` combines its `parts` partial results in order and applies
    /// `finish` with the axis length `n`; a thread per output (any grid, grid-stride).
    ReduceColumnsFinal,
    /// A general SIMT kernel.
    Simt,
}

/// One `extern "C"` symbol of a kernel's source.
#[derive(Debug)]
pub struct KernelEntry {
    /// The symbol to look up after compiling (`gelu_tanh_contig_f32`).
    pub symbol: &'static str,
    /// The tensor element type this entry is instantiated for (of its inputs).
    pub dtype: DType,
    /// The element type it writes: `dtype`, `Bool` for a predicate, or a cast's target.
    pub out_dtype: DType,
    /// The code path.
    pub variant: Variant,
    /// The arguments, in order.
    pub params: &'static [KernelParam],
    /// The block size the launcher should use when it has no better idea.
    pub default_block: u32,
    /// Entries of the same code compiled with some integer arguments fixed
    /// (`#[kernel(specialize(d = 64, 128))]`): a launch whose arguments have an entry's
    /// values runs that entry, and any other launch runs this one.
    pub specialized: &'static [SpecializedEntry],
}

/// An entry compiled for fixed values of some of its integer arguments, so the compiler folds
/// them through the body and allocates registers for that body alone.
#[derive(Debug)]
pub struct SpecializedEntry {
    /// The symbol (`flash_attn_fwd_bf16__d64`).
    pub symbol: &'static str,
    /// `(argument index, value)` for each fixed argument.
    pub values: &'static [(usize, u64)],
}

/// One argument of an entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelParam {
    /// The Rust parameter name (`x`, `out`, `x_strides`, `n`).
    pub name: &'static str,
    /// How it is passed.
    pub ty: ParamType,
}

/// How an argument is passed to a CUDA entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamType {
    /// A device pointer to elements.
    Ptr {
        /// The element type pointed to.
        elem: ScalarType,
        /// Whether the kernel writes through it.
        mutable: bool,
    },
    /// A scalar passed by value.
    Value(ScalarType),
    /// A [`KernelShape`] passed by value.
    Shape,
    /// A [`KernelStrides`] passed by value.
    Strides,
    /// A [`TensorMap`], passed as the 128-byte `CUtensorMap` the launcher encodes from it and
    /// the address of the buffer it views (a `const __grid_constant__` parameter).
    TensorMap,
    /// A device pointer to a table of device pointers, one per buffer (a `#[kernel]`
    /// parameter `&[&[T]]` or `&[&mut [T]]`).
    Table {
        /// The element type of every buffer.
        elem: ScalarType,
        /// Whether the kernel writes through the buffers.
        mutable: bool,
    },
}

/// A scalar type in an entry's signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarType {
    /// The entry's element type in storage (`float`, `double`, or a 16-bit pattern for f16 and
    /// bf16).
    Elem,
    /// The entry's output element type, [`KernelEntry::out_dtype`] (a cast's target).
    Out,
    /// The entry's compute type: `float` for f16, bf16 and f32, `double` for f64. Scalar `T`
    /// parameters are passed in this type (convert with `Float::to_acc`).
    Acc,
    /// `int`.
    I32,
    /// `unsigned int`.
    U32,
    /// `long long`.
    I64,
    /// `unsigned long long` (a Rust `usize` or `u64`: element counts, indices, seeds).
    U64,
    /// `double` (a kernel's `f64` parameter, whatever its element type).
    F64,
    /// `bool` (one byte).
    Bool,
}

/// Rank limit of [`KernelShape`] and [`KernelStrides`].
pub const MAX_RANK: usize = 6;

/// The bit of [`KernelShape::vectors`] that makes a strided elementwise entry move vectors.
pub const VECTOR_LAUNCH: u32 = 1 << 31;

/// The output shape of a strided elementwise launch, as the CUDA `rtx_shape` struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelShape {
    /// Number of dims in use (at most [`MAX_RANK`]).
    pub rank: u32,
    /// How a strided elementwise entry walks the shape (0 for every other kernel): with
    /// [`VECTOR_LAUNCH`] set, it moves 16 bytes of elements per step, the innermost dim and
    /// the strides along it counting such vectors, and bit `i` says input `i` is read as
    /// vectors (clear: one value, repeated). Also keeps `dims` 8-byte aligned.
    pub vectors: u32,
    /// Sizes; entries past `rank` are ignored.
    pub dims: [u64; MAX_RANK],
}

impl KernelShape {
    /// A shape from its dims.
    ///
    /// ```
    /// let s = rtx_kernels::kernel::KernelShape::new(&[2, 3]).unwrap();
    /// assert_eq!((s.rank, s.numel()), (2, 6));
    /// ```
    pub fn new(dims: &[usize]) -> Result<Self, LaunchError> {
        if dims.len() > MAX_RANK {
            return Err(LaunchError::new(format!(
                "kernel shape {dims:?} has rank {}, more than the {MAX_RANK} kernels support",
                dims.len()
            )));
        }
        let mut out = KernelShape {
            rank: dims.len() as u32,
            ..Default::default()
        };
        for (o, &d) in out.dims.iter_mut().zip(dims) {
            *o = d as u64;
        }
        Ok(out)
    }

    /// The dims in use.
    pub fn dims(&self) -> &[u64] {
        &self.dims[..(self.rank as usize).min(MAX_RANK)]
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.dims().iter().product::<u64>() as usize
    }
}

/// Where an input's elements lie for a strided launch, as the CUDA `rtx_strides` struct:
/// element `idx` of the output reads `offset + sum(idx[d] * strides[d])`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStrides {
    /// Element offset of index zero.
    pub offset: i64,
    /// Strides in elements, one per output dim; zero broadcasts.
    pub strides: [i64; MAX_RANK],
}

impl KernelStrides {
    /// Strides (in elements) and an offset; `strides.len()` must equal the output rank.
    ///
    /// ```
    /// // A row vector broadcast over 4 rows: stride 0 along the first dim.
    /// let s = rtx_kernels::kernel::KernelStrides::new(0, &[0, 1]).unwrap();
    /// assert_eq!(s.strides[..2], [0, 1]);
    /// ```
    pub fn new(offset: usize, strides: &[isize]) -> Result<Self, LaunchError> {
        if strides.len() > MAX_RANK {
            return Err(LaunchError::new(format!(
                "kernel strides {strides:?} have rank {}, more than {MAX_RANK}",
                strides.len()
            )));
        }
        let mut out = KernelStrides {
            offset: offset as i64,
            ..Default::default()
        };
        for (o, &s) in out.strides.iter_mut().zip(strides) {
            *o = s as i64;
        }
        Ok(out)
    }

    /// Contiguous row-major strides for a shape.
    ///
    /// ```
    /// use rtx_kernels::kernel::{KernelShape, KernelStrides};
    /// let s = KernelStrides::contiguous(&KernelShape::new(&[2, 3]).unwrap());
    /// assert_eq!(s.strides[..2], [3, 1]);
    /// ```
    pub fn contiguous(shape: &KernelShape) -> Self {
        let mut out = KernelStrides::default();
        let mut acc = 1i64;
        for d in (0..shape.dims().len()).rev() {
            out.strides[d] = acc;
            acc *= shape.dims[d] as i64;
        }
        out
    }
}

/// Bad arguments to a native kernel run (lengths, shapes, launch sizes), with a message that
/// names the kernel and the numbers involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchError {
    message: String,
}

impl LaunchError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        LaunchError {
            message: message.into(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for LaunchError {}
