//! The bridge from `#[kernel]` to the launch point: an entry of a generated
//! [`KernelSource`] (picked by element type and variant) becomes a [`Kernel`] and is launched
//! with arguments checked against the entry's descriptor.
//!
//! Invariant: every argument is checked against `KernelEntry::params` (count, and pointer /
//! scalar / layout struct kind) before a launch, so a mismatch is an error naming the kernel
//! and the parameter, never a misread argument. Scalars of the compute type are rounded here
//! to `float` or `double`, as the entry takes them.

use super::kernel::Kernel;
use super::launch::{DevicePtr, LaunchArgs, LaunchConfig, launch};
use crate::{BackendError, Device, Result};
use rtx_kernels::DType;
use rtx_kernels::kernel::{
    KernelEntry, KernelKind, KernelShape, KernelSource, KernelStrides, ParamType, ScalarType,
    TensorMap, Variant,
};

/// One argument of a generated entry point, in the entry's parameter order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A device pointer (to elements of the entry's type, or `bool`s for a mask).
    Ptr(DevicePtr),
    /// A scalar of the compute type, rounded to `float` for f32, f16 and bf16 entries (and
    /// converted with `as` for integer and bool entries, whose compute type is their own).
    Acc(f64),
    /// An `f64` (a kernel's `f64` parameter).
    F64(f64),
    /// A `usize` count or index.
    U64(u64),
    /// An `i64`.
    I64(i64),
    /// A `u32`.
    U32(u32),
    /// An `i32`.
    I32(i32),
    /// The output shape of a strided entry.
    Shape(KernelShape),
    /// One input's offset and strides of a strided entry.
    Strides(KernelStrides),
    /// A `TensorMap` parameter: the view, and the address of the buffer it views (encoded
    /// into a `CUtensorMap` at launch).
    TensorMap(TensorMap, DevicePtr),
}

/// The NVRTC options every generated kernel is compiled with (none beyond the architecture:
/// NVRTC's defaults, multiply-add fusion included).
const OPTIONS: &[&str] = &[];

/// The entry of `source` reading `dtype` and writing `out` in `variant`, or a `NoKernel`
/// error naming the kernel and GPU `ordinal` (element types the kernel has no entry for).
///
/// ```
/// use rtx_backends::cuda::kernel_entry;
/// use rtx_kernels::{DType, kernel::Variant, kernels::exp};
/// let e = kernel_entry(0, &exp::KERNEL, DType::F16, DType::F16, Variant::Strided).unwrap();
/// assert_eq!(e.symbol, "exp_strided_f16");
/// assert!(kernel_entry(0, &exp::KERNEL, DType::I32, DType::I32, Variant::Contiguous).is_err());
/// ```
pub fn kernel_entry(
    ordinal: usize,
    source: &'static KernelSource,
    dtype: DType,
    out: DType,
    variant: Variant,
) -> Result<&'static KernelEntry> {
    source
        .entry_to(dtype, out, variant)
        .ok_or(BackendError::NoKernel {
            op: source.name,
            device: Device::Cuda(ordinal),
        })
}

/// The launchable [`Kernel`] of one symbol of `source` (an entry's, or one of its
/// specialized entries'): the whole source, looked up by the symbol (one NVRTC compile per
/// source and GPU serves all its entries).
pub fn entry_kernel(source: &'static KernelSource, symbol: &'static str) -> Kernel {
    // Every generated entry starts with RTX_ENTRY() (the kernel prelude), which waits for
    // the grid before it.
    let k = Kernel::new(symbol, source.source)
        .waiting_for_previous_grid()
        .with_options(OPTIONS)
        .with_dynamic_shared(dynamic_shared(source));
    match source.kind {
        KernelKind::Simt {
            grid_sync: true, ..
        } => k.cooperative(),
        _ => k,
    }
}

/// The dynamic shared memory a launch of `source` takes (see [`KernelKind::Simt`]).
fn dynamic_shared(source: &KernelSource) -> u32 {
    match source.kind {
        KernelKind::Simt { dynamic_shared, .. } => dynamic_shared,
        _ => 0,
    }
}

/// Launches `entry` of `source` on GPU `ordinal`, after checking `args` against its
/// parameter list.
///
/// # Safety
/// Every pointer must be valid for what the kernel reads and writes given the other arguments
/// (element counts, shapes and strides): the descriptor says what a pointer is, not how far it
/// may be read.
pub unsafe fn launch_entry(
    ordinal: usize,
    source: &'static KernelSource,
    entry: &'static KernelEntry,
    config: LaunchConfig,
    args: &[Arg],
) -> Result<()> {
    if !source.entries.iter().any(|e| std::ptr::eq(e, entry)) {
        return Err(BackendError::BadArgument {
            op: "launch_entry",
            msg: format!(
                "`{}` is not an entry of kernel `{}`",
                entry.symbol, source.name
            ),
        });
    }
    let launch_args = marshal(entry, entry.dtype, args)?;
    let kernel = entry_kernel(source, specialized_symbol(entry, args));
    // SAFETY: the arguments match the entry's parameters (checked by `marshal`), and a
    // specialized entry takes the same ones; pointer validity is the caller's promise.
    unsafe { launch(ordinal, &kernel, config, &launch_args) }
}

/// The symbol a launch of `entry` with `args` runs: the first specialized entry whose fixed
/// arguments all have its values, else the entry's own.
pub fn specialized_symbol(entry: &'static KernelEntry, args: &[Arg]) -> &'static str {
    let has = |&(i, v): &(usize, u64)| match args.get(i) {
        Some(Arg::U64(a)) => *a == v,
        Some(Arg::U32(a)) => u64::from(*a) == v,
        Some(Arg::I64(a)) => u64::try_from(*a) == Ok(v),
        Some(Arg::I32(a)) => u64::try_from(*a) == Ok(v),
        _ => false,
    };
    entry
        .specialized
        .iter()
        .find(|s| s.values.iter().all(has))
        .map_or(entry.symbol, |s| s.symbol)
}

/// Checks `args` against `entry.params` and packs them as the entry takes them.
pub(crate) fn marshal(entry: &KernelEntry, dtype: DType, args: &[Arg]) -> Result<LaunchArgs> {
    let bad = |msg: String| BackendError::BadArgument {
        op: "launch_entry",
        msg: format!("kernel `{}`: {msg}", entry.symbol),
    };
    if args.len() != entry.params.len() {
        return Err(bad(format!(
            "{} arguments given, the entry takes {} ({:?})",
            args.len(),
            entry.params.len(),
            entry.params.iter().map(|p| p.name).collect::<Vec<_>>()
        )));
    }
    let mut out = LaunchArgs::new();
    for (p, a) in entry.params.iter().zip(args) {
        match (p.ty, *a) {
            (ParamType::Ptr { .. } | ParamType::Table { .. }, Arg::Ptr(ptr)) => {
                out.push(ptr);
            }
            (ParamType::Value(ScalarType::Acc), Arg::Acc(v)) => match dtype {
                DType::F64 => {
                    out.push(v);
                }
                DType::F32 | DType::F16 | DType::BF16 => {
                    out.push(v as f32);
                }
                DType::I32 => {
                    out.push(v as i32);
                }
                DType::I64 => {
                    out.push(v as i64);
                }
                DType::U8 => {
                    out.push(v as u8);
                }
                DType::Bool => {
                    out.push(v != 0.0);
                }
            },
            // An integer scalar of the compute type, exact (an f64 holds i64 only to 2^53).
            (ParamType::Value(ScalarType::Acc), Arg::I64(v)) if !dtype.is_float() => match dtype {
                DType::I32 => {
                    out.push(v as i32);
                }
                DType::U8 => {
                    out.push(v as u8);
                }
                DType::Bool => {
                    out.push(v != 0);
                }
                _ => {
                    out.push(v);
                }
            },
            (ParamType::Value(ScalarType::F64), Arg::F64(v)) => {
                out.push(v);
            }
            (ParamType::Value(ScalarType::U64), Arg::U64(v)) => {
                out.push(v);
            }
            (ParamType::Value(ScalarType::I64), Arg::I64(v)) => {
                out.push(v);
            }
            (ParamType::Value(ScalarType::U32), Arg::U32(v)) => {
                out.push(v);
            }
            (ParamType::Value(ScalarType::I32), Arg::I32(v)) => {
                out.push(v);
            }
            (ParamType::Shape, Arg::Shape(s)) => {
                out.push(s);
            }
            (ParamType::Strides, Arg::Strides(s)) => {
                out.push(s);
            }
            (ParamType::TensorMap, Arg::TensorMap(m, ptr)) => {
                out.push(super::tensor_map::encode(&m, ptr, dtype)?);
            }
            (want, got) => {
                return Err(bad(format!(
                    "parameter `{}` is {want:?}, the argument given is {got:?}",
                    p.name
                )));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtx_kernels::kernels::{leaky_relu, sum};

    #[test]
    fn arguments_are_checked_against_the_descriptor() {
        let e = ok(kernel_entry(
            0,
            &leaky_relu::KERNEL,
            DType::F32,
            DType::F32,
            Variant::Contiguous,
        ));
        let p = Arg::Ptr(DevicePtr(256));
        let good = [p, Arg::Acc(0.1), p, Arg::U64(4)];
        assert_eq!(ok(marshal(e, DType::F32, &good)).len(), 4);
        let swapped = [p, p, Arg::Acc(0.1), Arg::U64(4)];
        let msg = marshal(e, DType::F32, &swapped)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(
            msg.as_ref()
                .is_err_and(|m| m.contains("leaky_relu_contig_f32") && m.contains("`slope`")),
            "{msg:?}"
        );
        assert!(marshal(e, DType::F32, &good[..3]).is_err());
        let r = ok(kernel_entry(
            0,
            &sum::KERNEL,
            DType::BF16,
            DType::BF16,
            Variant::Reduce,
        ));
        let args = [p, p, Arg::U64(1), Arg::U64(2), Arg::U64(3)];
        assert_eq!(ok(marshal(r, DType::BF16, &args)).len(), 5);
    }

    #[test]
    fn a_specialized_value_launches_its_own_entry() {
        use rtx_kernels::kernels::flash_attn_fwd;
        let e = ok(kernel_entry(
            0,
            &flash_attn_fwd::KERNEL,
            DType::BF16,
            DType::BF16,
            Variant::Simt,
        ));
        let d = e.params.iter().position(|p| p.name == "d");
        assert_eq!(d, Some(13), "{:?}", e.params);
        let args = |d: u64| {
            let mut a = vec![Arg::U64(0); e.params.len()];
            a[13] = Arg::U64(d);
            a
        };
        assert_eq!(specialized_symbol(e, &args(64)), "flash_attn_fwd_bf16__d64");
        assert_eq!(
            specialized_symbol(e, &args(128)),
            "flash_attn_fwd_bf16__d128"
        );
        // Another head dim runs the general entry, which reads d at run time.
        assert_eq!(specialized_symbol(e, &args(96)), "flash_attn_fwd_bf16");
        // Every specialized symbol is an entry point of the source NVRTC compiles.
        for s in e.specialized {
            assert!(
                flash_attn_fwd::KERNEL
                    .source
                    .contains(&format!(" {}(", s.symbol)),
                "{} is not in the source",
                s.symbol
            );
        }
    }

    fn ok<T>(r: Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }
}
