//! The generated CUDA C of the scalar-operand kernels (`binary_scalar`, `pow_scalar`,
//! `cmp_scalar`), run on the host (see `host_run`) and held bit for bit to the CUDA C of the
//! tensor-tensor kernels (`add`, ..., `pow`, `lt`, ...) given a buffer filled with the scalar,
//! and to their native twins: on a GPU the two paths then give the same bits too. Contiguous
//! (vector loads and the scalar tail) and strided entries, every element type, both sides.
//! Skipped with a notice where no C++ compiler exists.

use crate::host_run::{HostArg, bytes, from_bytes, run};
use rtx_kernels::kernel::{
    KernelEntry, KernelShape, KernelSource, KernelStrides, LaunchConfig, Variant,
};
use rtx_kernels::kernels::*;
use rtx_kernels::{BinaryOp, CmpOp, DType, Element, Num, bf16, f16};

const LAUNCH: LaunchConfig = LaunchConfig {
    grid: rtx_kernels::kernel::block::Dim3 { x: 2, y: 1, z: 1 },
    block: rtx_kernels::kernel::block::Dim3 { x: 32, y: 1, z: 1 },
};

fn entry(k: &'static KernelSource, from: DType, to: DType, v: Variant) -> &'static KernelEntry {
    k.entry_to(from, to, v)
        .unwrap_or_else(|| panic!("{} has no {from:?} -> {to:?} {v:?} entry", k.name))
}

/// Inputs with the specials of `E`: 35 of them, so the contiguous entry has a tail after its
/// vector loads and a transposed [7, 5] view reads them all.
fn inputs<E: Num>() -> Vec<E> {
    let mut v: Vec<E> = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        -2.75,
        3.0,
        2.0,
        -100.0,
        7.0,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]
    .into_iter()
    .map(E::from_f64)
    .collect();
    v.extend([E::LOWEST, E::HIGHEST]);
    v.extend((0..20).map(|i| E::from_f64(i as f64 * 0.61 - 5.0)));
    v
}

/// `x` (a dense [5, 7]) read through its transpose [7, 5], in that view's order.
fn transposed<E: Copy>(x: &[E]) -> Vec<E> {
    (0..35).map(|k| x[(k / 5) + 7 * (k % 5)]).collect()
}

/// Scalars of `E`; integer ones stay below 2^53, where the harness's f64 carries them exactly.
fn scalars<E: Num>() -> Vec<E> {
    [2.0, -1.0, 0.0, -0.0, 0.5, 7.0, f64::NAN, f64::INFINITY]
        .into_iter()
        .map(E::from_f64)
        .chain([E::LOWEST, E::HIGHEST])
        .filter(|c| E::DTYPE.is_float() || c.to_f64().abs() < 2f64.powi(53))
        .collect()
}

/// Output bytes of a tensor-tensor kernel `k` with one operand a buffer filled with `c`.
fn tensor_path<E: Element, O: Element>(
    k: &'static KernelSource,
    x: &[E],
    c: E,
    left: bool,
) -> Option<Vec<u8>> {
    let filled = vec![c; x.len()];
    let (a, b) = if left {
        (&filled[..], x)
    } else {
        (x, &filled[..])
    };
    let out = vec![O::default(); x.len()];
    let e = entry(k, E::DTYPE, O::DTYPE, Variant::Contiguous);
    let got = run(
        k,
        e,
        LAUNCH,
        &[
            HostArg::Buf(bytes(a)),
            HostArg::Buf(bytes(b)),
            HostArg::Buf(bytes(&out)),
            HostArg::I(x.len() as u64),
        ],
    )?;
    Some(got[2].clone())
}

/// Output bytes of a scalar kernel `k` (uniforms `c` then `ints`) over `x` dense, and over
/// `x` viewed as the transpose [7, 5] of a dense [5, 7] by the strided entry.
fn scalar_path<E: Element, O: Element>(
    k: &'static KernelSource,
    x: &[E],
    c: E,
    ints: &[u64],
) -> Option<(Vec<u8>, Vec<u8>)> {
    let n = x.len();
    let out = vec![O::default(); n];
    let uniforms =
        || std::iter::once(HostArg::F(c.to_f64())).chain(ints.iter().map(|&i| HostArg::I(i)));
    let mut args = vec![HostArg::Buf(bytes(x))];
    args.extend(uniforms());
    args.extend([HostArg::Buf(bytes(&out)), HostArg::I(n as u64)]);
    let e = entry(k, E::DTYPE, O::DTYPE, Variant::Contiguous);
    let dense = run(k, e, LAUNCH, &args)?.swap_remove(1);
    let st = KernelStrides::new(0, &[1, 7]).unwrap();
    let mut args = vec![HostArg::Buf(bytes(x)), HostArg::Strides(st)];
    args.extend(uniforms());
    args.extend([
        HostArg::Buf(bytes(&out)),
        HostArg::Shape(KernelShape::new(&[7, 5]).unwrap()),
        HostArg::I(n as u64),
    ]);
    let e = entry(k, E::DTYPE, O::DTYPE, Variant::Strided);
    let strided = run(k, e, LAUNCH, &args)?.swap_remove(1);
    Some((dense, strided))
}

/// `x op c` and `c op x` through the scalar kernel against the tensor kernel, for `ops`.
fn against_tensor_kernels<E: Num>(ops: &[BinaryOp]) -> Option<()> {
    let x = inputs::<E>();
    let xt = transposed(&x);
    for &op in ops {
        let (k, code) = binary_scalar_kernel(op);
        for c in scalars::<E>() {
            for left in [false, true] {
                let what = format!("{op:?} {:?} c = {c:?} left {left}", E::DTYPE);
                let ints: Vec<u64> = code
                    .into_iter()
                    .map(u64::from)
                    .chain([left as u64])
                    .collect();
                let (dense, strided) = scalar_path::<E, E>(k, &x, c, &ints)?;
                let want = tensor_path::<E, E>(binary_kernel(op), &x, c, left)?;
                assert_eq!(dense, want, "{what} contiguous");
                let want_t = tensor_path::<E, E>(binary_kernel(op), &xt, c, left)?;
                assert_eq!(strided, want_t, "{what} strided");
            }
        }
    }
    Some(())
}

/// The native `binary_scalar` against the native tensor kernels, which the CPU backend's
/// markers equal (tested beside them).
fn native_twin<E: Num>() {
    let x = inputs::<E>();
    for op in BinaryOp::ALL {
        let Some(code) = binary_scalar_code(op) else {
            continue;
        };
        for c in scalars::<E>() {
            for left in [false, true] {
                let filled = vec![c; x.len()];
                let (a, b) = if left {
                    (&filled[..], &x[..])
                } else {
                    (&x[..], &filled[..])
                };
                let mut want = vec![E::default(); x.len()];
                let tensor = match op {
                    BinaryOp::Add => add::map,
                    BinaryOp::Sub => sub::map,
                    BinaryOp::Mul => mul::map,
                    BinaryOp::Div => div::map,
                    BinaryOp::Max => maximum::map,
                    _ => minimum::map,
                };
                tensor(a, b, &mut want).unwrap();
                let mut got = vec![E::default(); x.len()];
                binary_scalar::map(&x, c, code, left as u32, &mut got).unwrap();
                assert_eq!(
                    bytes(&got),
                    bytes(&want),
                    "{op:?} {:?} c = {c:?} left {left}",
                    E::DTYPE
                );
            }
        }
    }
}

fn comparisons<E: Num>() -> Option<()> {
    let x = inputs::<E>();
    let xt = transposed(&x);
    let ops = [
        (CmpOp::Eq, &eq::KERNEL),
        (CmpOp::Ne, &ne::KERNEL),
        (CmpOp::Lt, &lt::KERNEL),
        (CmpOp::Le, &le::KERNEL),
        (CmpOp::Gt, &gt::KERNEL),
        (CmpOp::Ge, &ge::KERNEL),
    ];
    for (op, k) in ops {
        for c in scalars::<E>() {
            let code = cmp_scalar_code(op) as u64;
            let (dense, strided) = scalar_path::<E, bool>(&cmp_scalar::KERNEL, &x, c, &[code])?;
            let what = format!("{op:?} {:?} c = {c:?}", E::DTYPE);
            assert_eq!(
                dense,
                tensor_path::<E, bool>(k, &x, c, false)?,
                "{what} contiguous"
            );
            let mut native = vec![false; x.len()];
            cmp_scalar::map(&x, c, code as u32, &mut native).unwrap();
            assert_eq!(from_bytes::<bool>(&dense), native, "{what} native");
            assert_eq!(
                strided,
                tensor_path::<E, bool>(k, &xt, c, false)?,
                "{what} strided"
            );
        }
    }
    Some(())
}

#[test]
fn scalar_kernels_give_the_tensor_kernels_bits_on_the_host() {
    let all = BinaryOp::ALL;
    let num = &all[..6];
    assert!(!num.contains(&BinaryOp::Pow));
    let _ = against_tensor_kernels::<f32>(&all)
        .and(against_tensor_kernels::<f64>(&all))
        .and(against_tensor_kernels::<f16>(&all))
        .and(against_tensor_kernels::<bf16>(&all))
        .and(against_tensor_kernels::<i32>(num))
        .and(against_tensor_kernels::<i64>(num))
        .and(against_tensor_kernels::<u8>(num));
}

#[test]
fn native_scalar_kernels_equal_the_native_tensor_kernels() {
    native_twin::<f32>();
    native_twin::<f64>();
    native_twin::<f16>();
    native_twin::<bf16>();
    native_twin::<i32>();
    native_twin::<i64>();
    native_twin::<u8>();
    // `pow`, natively, in one float type per compute type.
    let x = inputs::<f32>();
    for left in [false, true] {
        let c = 1.5f32;
        let filled = vec![c; x.len()];
        let (a, b) = if left {
            (&filled[..], &x[..])
        } else {
            (&x[..], &filled[..])
        };
        let mut want = vec![0f32; x.len()];
        pow::map(a, b, &mut want).unwrap();
        let mut got = vec![0f32; x.len()];
        pow_scalar::map(&x, c, left as u32, &mut got).unwrap();
        assert_eq!(bytes(&got), bytes(&want), "pow left {left}");
    }
    let x = inputs::<bf16>();
    let c = bf16::from_f32(0.5);
    let mut want = vec![bf16::ZERO; x.len()];
    pow::map(&x, &vec![c; x.len()], &mut want).unwrap();
    let mut got = vec![bf16::ZERO; x.len()];
    pow_scalar::map(&x, c, 0, &mut got).unwrap();
    assert_eq!(bytes(&got), bytes(&want), "pow bf16");
}

#[test]
fn scalar_comparisons_give_the_tensor_comparisons_bits_on_the_host() {
    let _ = comparisons::<f32>()
        .and(comparisons::<f16>())
        .and(comparisons::<bf16>())
        .and(comparisons::<i64>())
        .and(comparisons::<u8>());
}
