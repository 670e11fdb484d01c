//! The native side of `#[kernel]`: every example kernel against an independent float64
//! reference, the derived derivative kernels against finite differences, the slice maps'
//! broadcasting and argument checks, and the SIMT block emulation (barriers, shuffles,
//! atomics).

use rtx_kernels::kernel::{KernelKind, KernelShape, KernelStrides, LaunchConfig, Variant};
use rtx_kernels::kernels::*;
use rtx_kernels::{DType, UnaryOp, bf16, f16};

/// Deterministic test values in [-4, 4).
fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 8.0 - 4.0
        })
        .collect()
}

fn gelu_ref(x: f64) -> f64 {
    0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
}

fn huber_ref(x: f64, y: f64, delta: f64) -> f64 {
    let d = (x - y).abs();
    if d < delta {
        0.5 * d * d
    } else {
        delta * (d - 0.5 * delta)
    }
}

#[test]
fn elementwise_scalar_functions_match_references_in_every_type() {
    for x in values(200, 1) {
        let r = gelu_ref(x);
        assert!((gelu_tanh(x) - r).abs() < 1e-14, "f64 {x}");
        assert!((gelu_tanh(x as f32) as f64 - r).abs() < 1e-5, "f32 {x}");
        // Half types compute in f32 and round once at the end.
        let h = gelu_tanh(f16::from_f64(x)).to_f64();
        assert!(
            (h - gelu_ref(f16::from_f64(x).to_f64())).abs() <= 4e-3 * r.abs().max(1.0),
            "f16 {x}"
        );
        let b = gelu_tanh(bf16::from_f64(x)).to_f64();
        assert!(
            (b - gelu_ref(bf16::from_f64(x).to_f64())).abs() <= 1.6e-2 * r.abs().max(1.0),
            "bf16 {x}"
        );
        assert_eq!(leaky_relu(x, 0.1), if x > 0.0 { x } else { 0.1 * x });
        assert!((huber(x, 0.5, 1.5) - huber_ref(x, 0.5, 1.5)).abs() < 1e-14);
    }
}

#[test]
fn map_and_strided_map_broadcast_like_the_reference() {
    let (rows, cols) = (3, 5);
    let x = values(rows * cols, 2);
    let y_row = values(cols, 3);
    // Contiguous map with y expanded by hand.
    let y_full: Vec<f64> = (0..rows * cols).map(|i| y_row[i % cols]).collect();
    let mut out = vec![0.0; rows * cols];
    huber::map(&x, &y_full, 1.0, &mut out).unwrap();
    for i in 0..rows * cols {
        assert_eq!(out[i], huber_ref(x[i], y_full[i], 1.0));
    }
    // Strided: x transposed (read column-major storage), y broadcast along rows.
    let xt: Vec<f64> = (0..rows * cols)
        .map(|i| x[(i % rows) * cols + i / rows])
        .collect();
    let shape = KernelShape::new(&[rows, cols]).unwrap();
    let x_st = KernelStrides::new(0, &[1, rows as isize]).unwrap();
    let y_st = KernelStrides::new(0, &[0, 1]).unwrap();
    let mut out2 = vec![0.0; rows * cols];
    huber::map_strided(&xt, &x_st, &y_row, &y_st, 1.0, &mut out2, &shape).unwrap();
    assert_eq!(out, out2);
    // Arguments that do not fit are errors that name the input.
    let err = huber::map(&x[..4], &y_full, 1.0, &mut out).unwrap_err();
    assert!(err.message().contains("`x` has 4 elements"), "{err}");
    let bad = KernelStrides::new(0, &[cols as isize, 1]).unwrap();
    let err = huber::map_strided(&x, &x_st, &y_row, &bad, 1.0, &mut out2, &shape).unwrap_err();
    assert!(err.message().contains("input `y`"), "{err}");
}

/// Central difference of `f` at `x`.
fn fd(f: impl Fn(f64) -> f64, x: f64) -> f64 {
    let h = 1e-6;
    (f(x + h) - f(x - h)) / (2.0 * h)
}

#[test]
fn derived_gradients_match_finite_differences() {
    for x in values(100, 4) {
        let g = 0.75;
        let want = g * fd(gelu_tanh, x);
        assert!((gelu_tanh_grad_x(x, g) - want).abs() < 1e-7, "gelu at {x}");
        if x.abs() > 1e-3 {
            let want = g * fd(|v| leaky_relu(v, 0.2), x);
            assert!(
                (leaky_relu_grad_x(x, 0.2, g) - want).abs() < 1e-7,
                "leaky at {x}"
            );
        }
        for y in [-1.0, 0.3, 2.5] {
            // Away from the kinks at |x - y| = 0 and = delta.
            let d = (x - y).abs();
            if d < 1e-3 || (d - 1.5).abs() < 1e-3 {
                continue;
            }
            let dx = g * fd(|v| huber(v, y, 1.5), x);
            let dy = g * fd(|v| huber(x, v, 1.5), y);
            assert!(
                (huber_grad_x(x, y, 1.5, g) - dx).abs() < 1e-7,
                "huber dx at {x}, {y}"
            );
            assert!(
                (huber_grad_y(x, y, 1.5, g) - dy).abs() < 1e-7,
                "huber dy at {x}, {y}"
            );
        }
    }
    // The derivative kernels are full elementwise kernels too.
    let mut out = vec![0.0f32; 3];
    gelu_tanh_grad_x::map(&[0.0, 1.0, -1.0], &[1.0, 1.0, 1.0], &mut out).unwrap();
    assert_eq!(out[0], 0.5);
}

/// Naive float64 reduction of a row-major tensor along `axis`.
fn reduce_ref(x: &[f64], shape: &[usize], axis: usize, f: impl Fn(&[f64]) -> f64) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out = Vec::new();
    for o in 0..outer {
        for i in 0..inner {
            let lane: Vec<f64> = (0..shape[axis])
                .map(|k| x[(o * shape[axis] + k) * inner + i])
                .collect();
            out.push(f(&lane));
        }
    }
    out
}

#[test]
fn reductions_match_references_along_every_axis() {
    let shape = [3, 4, 5];
    let x = values(60, 5);
    for axis in 0..3 {
        let check = |(got, got_shape): (Vec<f64>, Vec<usize>), want: Vec<f64>, keep: bool| {
            let mut s = shape.to_vec();
            if keep {
                s[axis] = 1
            } else {
                s.remove(axis);
            }
            assert_eq!(got_shape, s);
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-12, "axis {axis}: {g} vs {w}");
            }
        };
        check(
            sum::reduce_axis(&x, &shape, axis, true).unwrap(),
            reduce_ref(&x, &shape, axis, |l| l.iter().sum()),
            true,
        );
        check(
            max::reduce_axis(&x, &shape, axis, false).unwrap(),
            reduce_ref(&x, &shape, axis, |l| {
                l.iter().cloned().fold(f64::MIN, f64::max)
            }),
            false,
        );
        check(
            mean::reduce_axis(&x, &shape, axis, false).unwrap(),
            reduce_ref(&x, &shape, axis, |l| l.iter().sum::<f64>() / l.len() as f64),
            false,
        );
        check(
            sum_squares::reduce_axis(&x, &shape, axis, true).unwrap(),
            reduce_ref(&x, &shape, axis, |l| l.iter().map(|v| v * v).sum()),
            true,
        );
    }
    // f16 accumulates in f32: 4096 ones sum exactly, which an f16 accumulator cannot.
    let ones = vec![f16::ONE; 4096];
    assert_eq!(
        sum::reduce_axis(&ones, &[4096], 0, false).unwrap().0[0].to_f64(),
        4096.0
    );
    let err = sum::reduce_axis(&x, &shape, 3, false).unwrap_err();
    assert!(err.message().contains("axis 3"), "{err}");
    assert_eq!(max(2.0f32, 3.0), 3.0);
}

#[test]
fn axpy_and_dot_match_references() {
    let n = 1000;
    let (x, y0) = (values(n, 6), values(n, 7));
    let mut y = y0.clone();
    axpy(LaunchConfig::new(8, 128), 1.5, &x, &mut y, n).unwrap();
    for i in 0..n {
        assert_eq!(y[i], 1.5 * x[i] + y0[i]);
    }
    let want: f64 = x.iter().zip(&y0).map(|(a, b)| a * b).sum();
    for (grid, block) in [(1, 256), (3, 64), (5, 32)] {
        let mut out = vec![0.0];
        dot(LaunchConfig::new(grid, block), &x, &y0, &mut out, n).unwrap();
        assert!(
            (out[0] - want).abs() < 1e-9,
            "grid {grid} block {block}: {} vs {want}",
            out[0]
        );
    }
    let mut out = vec![0.0f32];
    let err = dot(LaunchConfig::new(1, 2048), &[0.0f32], &[0.0], &mut out, 1).unwrap_err();
    assert!(err.message().contains("2048 threads"), "{err}");
}

/// Row cases for the softmax kernels: rows held in registers (at most 32 values per thread:
/// short, ragged, exactly 32 per thread) and rows streamed from memory (longer).
const ROW_CASES: [(usize, usize, u32); 8] = [
    (3, 7, 32),
    (2, 100, 64),
    (1, 1, 32),
    (3, 1024, 32),
    (2, 999, 32),
    (2, 1025, 32),
    (3, 301, 32),
    (1, 2100, 64),
];

/// The maximum and `Σ exp(x - max)` of a row in f64.
fn row_stats(row: &[f64]) -> (f64, f64) {
    let m = row.iter().cloned().fold(f64::MIN, f64::max);
    (m, row.iter().map(|v| (v - m).exp()).sum())
}

#[test]
fn softmax_rows_matches_reference_for_several_block_sizes() {
    for (rows, cols, block) in ROW_CASES {
        let x = values(rows * cols, (rows * cols) as u64);
        let mut out = vec![0.0; rows * cols];
        softmax_rows(LaunchConfig::new(rows as u32, block), &x, &mut out, cols).unwrap();
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let (m, z) = row_stats(row);
            for c in 0..cols {
                let want = (row[c] - m).exp() / z;
                assert!(
                    (out[r * cols + c] - want).abs() < 1e-14,
                    "{rows}x{cols} block {block}"
                );
            }
        }
        let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
        let mut outf = vec![0.0f32; rows * cols];
        softmax_rows(LaunchConfig::new(rows as u32, block), &xf, &mut outf, cols).unwrap();
        for i in 0..rows * cols {
            assert!((outf[i] as f64 - out[i]).abs() < 1e-6);
        }
    }
}

#[test]
fn log_softmax_and_logsumexp_rows_match_reference_for_several_block_sizes() {
    for (rows, cols, block) in ROW_CASES {
        let x = values(rows * cols, 7 + (rows * cols) as u64);
        let launch = LaunchConfig::new(rows as u32, block);
        let mut out = vec![0.0; rows * cols];
        log_softmax_rows(launch, &x, &mut out, cols).unwrap();
        let mut lse = vec![0.0; rows];
        logsumexp_rows(launch, &x, &mut lse, cols).unwrap();
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let (m, z) = row_stats(row);
            for c in 0..cols {
                let want = (row[c] - m) - z.ln();
                let got = out[r * cols + c];
                assert!(
                    (got - want).abs() < 1e-12,
                    "{rows}x{cols} block {block}: {got} vs {want}"
                );
            }
            let want = m + z.ln();
            assert!(
                (lse[r] - want).abs() < 1e-12,
                "{rows}x{cols} block {block}: logsumexp {} vs {want}",
                lse[r]
            );
        }
        // f16 computes in f32 and rounds once on store.
        let xh: Vec<f16> = x.iter().map(|&v| f16::from_f64(v)).collect();
        let mut outh = vec![f16::ZERO; rows * cols];
        log_softmax_rows(launch, &xh, &mut outh, cols).unwrap();
        for r in 0..rows {
            let row: Vec<f64> = xh[r * cols..(r + 1) * cols]
                .iter()
                .map(|v| v.to_f64())
                .collect();
            let (m, z) = row_stats(&row);
            for c in 0..cols {
                let want = (row[c] - m) - z.ln();
                let got = outh[r * cols + c].to_f64();
                assert!(
                    (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                    "f16 {rows}x{cols} block {block}: {got} vs {want}"
                );
            }
        }
    }
    // A row of negative infinities stays infinite; a row with +inf gives +inf.
    let x = [f64::NEG_INFINITY; 3];
    let mut lse = [0.0; 1];
    logsumexp_rows(LaunchConfig::new(1, 32), &x, &mut lse, 3).unwrap();
    assert_eq!(lse[0], f64::NEG_INFINITY);
    logsumexp_rows(LaunchConfig::new(1, 32), &[1.0, f64::INFINITY], &mut lse, 2).unwrap();
    assert_eq!(lse[0], f64::INFINITY);
}

#[test]
fn every_specialized_entry_is_in_its_source() {
    // `specialize(d = 64, 128)` gives each value an entry point of its own, which fixes the
    // argument it names (an integer) and has the general entry's name with the value after it.
    let mut n = 0;
    for k in every_kernel() {
        for e in k.entries {
            for s in e.specialized {
                n += 1;
                assert!(
                    s.symbol.starts_with(&format!("{}__", e.symbol)),
                    "{}",
                    s.symbol
                );
                let decl = format!(" {}(", s.symbol);
                assert!(
                    k.source.contains(&decl),
                    "{} is not in its source",
                    s.symbol
                );
                for &(i, v) in s.values {
                    let p = &e.params[i];
                    assert!(
                        matches!(p.ty, rtx_kernels::kernel::ParamType::Value(_)),
                        "{}: {} is not a value",
                        s.symbol,
                        p.name
                    );
                    assert!(s.symbol.contains(&format!("{}{v}", p.name)), "{}", s.symbol);
                }
            }
        }
    }
    // Five attention kernels on the tensor cores (bf16 and f16 entries), two head dims each
    // (the `mma.sync` dQ also by 64 or 128 rows a block), the `wgmma` forward by head dim and
    // one or two warpgroups, and the backward's row dot (four entries) by head dim; the decoding product
    // `qmatvec_ggml` (f32, f64, f16 and bf16 entries) for one row, each of two types, two
    // inputs and SwiGLU or not (the product of the lists); `qmatmul_ggml` (four entries) for
    // each input and SwiGLU or not; `qmatvec_ggml_wide` (four entries) for each type and input.
    assert_eq!(
        n,
        4 * 2 * 2 + 2 * 2 * 2 + 2 * 2 * 2 + 4 * 2 + 4 * 2 * 2 * 2 + 4 * 2 * 2 + 4 * 2 * 2,
        "specialized entries"
    );
}

#[test]
fn descriptors_list_one_entry_per_dtype_and_variant() {
    // The examples, the foundation's ops, and one derivative per differentiable example input;
    // the unary ops come from the registry, each with its kernel and its derivative (but `neg`
    // and `abs`, over integers too, which have none).
    assert_eq!(ALL.len(), 100);
    let all = every_kernel();
    assert_eq!(all.len(), ALL.len() + 2 * UnaryOp::ALL.len() - 2 - 2);
    for op in UnaryOp::ALL {
        assert!(all.iter().any(|k| k.name == op.name()), "{}", op.name());
    }
    let mut names: Vec<&str> = all.iter().map(|k| k.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "kernel names are unique");
    for k in all {
        let variants: &[Variant] = match k.kind {
            KernelKind::Elementwise { .. } => &[Variant::Contiguous, Variant::Strided],
            KernelKind::Reduce => &[
                Variant::Reduce,
                Variant::ReduceColumns,
                Variant::ReduceRows,
                Variant::ReducePartial,
                Variant::ReduceFinal,
                Variant::ReduceColumnsPartial,
                Variant::ReduceColumnsFinal,
            ],
            KernelKind::Simt { .. } => &[Variant::Simt],
        };
        // A kernel with an output type parameter has an entry per (input, output) pair.
        let pairs = k
            .entries
            .iter()
            .any(|e| e.out_dtype != e.dtype && e.out_dtype != DType::Bool);
        // `T: Float` gives the first four types, `T: Num` seven, `T: Element` all eight.
        let all = [
            DType::F32,
            DType::F64,
            DType::F16,
            DType::BF16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::Bool,
        ];
        let span = |has: &dyn Fn(DType) -> bool| -> Vec<DType> {
            let n = all.iter().take_while(|&&d| has(d)).count();
            assert!([4, 7, 8].contains(&n), "{}: {n} element types", k.name);
            assert!(all[n..].iter().all(|&d| !has(d)), "{}", k.name);
            all[..n].to_vec()
        };
        // A kernel on the tensor cores exists for the 16-bit floats only.
        let half_only = k
            .entries
            .iter()
            .all(|e| matches!(e.dtype, DType::F16 | DType::BF16));
        let ins = if half_only {
            vec![DType::F16, DType::BF16]
        } else {
            span(&|d| k.entries.iter().any(|e| e.dtype == d))
        };
        let outs_all = if pairs {
            span(&|d| k.entries.iter().any(|e| e.out_dtype == d))
        } else {
            vec![]
        };
        let suffix = |dt: DType| match dt {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::Bool => "bool",
        };
        for &v in variants {
            // The two-stage reductions keep float partial results: float element types only.
            let two_stage = matches!(
                v,
                Variant::ReducePartial
                    | Variant::ReduceFinal
                    | Variant::ReduceColumnsPartial
                    | Variant::ReduceColumnsFinal
            );
            for &dt in ins.iter().filter(|d| !two_stage || d.is_float()) {
                let outs: Vec<DType> = if pairs {
                    outs_all.clone()
                } else {
                    vec![k.entry(dt, v).map_or(dt, |e| e.out_dtype)]
                };
                for out in outs {
                    let e = k
                        .entry_to(dt, out, v)
                        .unwrap_or_else(|| panic!("{} lacks {dt:?} -> {out:?} {v:?}", k.name));
                    let end = if pairs {
                        format!("_{}_to_{}", suffix(dt), suffix(out))
                    } else {
                        format!("_{}", suffix(dt))
                    };
                    assert!(
                        e.symbol.starts_with(k.name) && e.symbol.ends_with(&end),
                        "{}",
                        e.symbol
                    );
                }
            }
        }
        let per_variant = |v: &Variant| match v {
            Variant::ReducePartial
            | Variant::ReduceFinal
            | Variant::ReduceColumnsPartial
            | Variant::ReduceColumnsFinal => ins.iter().filter(|d| d.is_float()).count(),
            _ if pairs => ins.len() * outs_all.len(),
            _ => ins.len(),
        };
        assert_eq!(
            k.entries.len(),
            variants.iter().map(per_variant).sum::<usize>(),
            "{}",
            k.name
        );
    }
    assert_eq!(
        huber::KERNEL.kind,
        KernelKind::Elementwise {
            inputs: 2,
            vectors: true
        }
    );
    assert_eq!(
        softmax_rows::KERNEL.kind,
        KernelKind::Simt {
            uses_sync: true,
            dynamic_shared: 0,
            grid_sync: false,
        }
    );
    assert_eq!(
        axpy::KERNEL.kind,
        KernelKind::Simt {
            uses_sync: false,
            dynamic_shared: 0,
            grid_sync: false,
        }
    );
    let strided = huber::KERNEL.entry(DType::F32, Variant::Strided).unwrap();
    let names: Vec<&str> = strided.params.iter().map(|p| p.name).collect();
    assert_eq!(
        names,
        [
            "x",
            "x_strides",
            "y",
            "y_strides",
            "delta",
            "out",
            "shape",
            "n"
        ]
    );
}

#[test]
fn elementwise_kernels_read_and_write_bool_buffers() {
    use rtx_kernels::kernel::{ParamType, ScalarType};
    use rtx_kernels::kernels::{lt, select};
    let e = select::KERNEL
        .entry(DType::F16, Variant::Contiguous)
        .unwrap();
    let bool_in = ParamType::Ptr {
        elem: ScalarType::Bool,
        mutable: false,
    };
    assert_eq!(e.params[0].ty, bool_in);
    assert_eq!(
        e.params[1].ty,
        ParamType::Ptr {
            elem: ScalarType::Elem,
            mutable: false
        }
    );
    let e = lt::KERNEL.entry(DType::F32, Variant::Strided).unwrap();
    let out = e.params.iter().find(|p| p.name == "out").unwrap();
    assert_eq!(
        out.ty,
        ParamType::Ptr {
            elem: ScalarType::Bool,
            mutable: true
        }
    );
    let mut mask = vec![false; 3];
    lt::map(&[1.0f32, 2.0, f32::NAN], &[2.0, 2.0, 0.0], &mut mask).unwrap();
    assert_eq!(mask, vec![true, false, false]);
    let mut picked = vec![0.0f64; 3];
    select::map(&mask, &[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], &mut picked).unwrap();
    assert_eq!(picked, vec![1.0, 5.0, 6.0]);
    assert!(!select::KERNEL.source.contains("rtx_load_vec(cond"));
}

#[test]
fn a_second_type_parameter_gives_one_entry_per_type_pair() {
    use rtx_kernels::Element;
    // Every (input, output) pair of the eight element types, contiguous and strided.
    assert_eq!(cast::KERNEL.entries.len(), 2 * 64);
    let e = cast::KERNEL
        .entry_to(DType::F64, DType::F16, Variant::Contiguous)
        .unwrap();
    assert_eq!(e.symbol, "cast_contig_f64_to_f16");
    assert!(cast::KERNEL.source.contains(&format!(" {}(", e.symbol)));
    let x = [1.0f64 / 3.0, -2.5, 65504.0, 1e6];
    let mut out = vec![f16::ZERO; 4];
    cast::map(&x, &mut out).unwrap();
    let want: Vec<f16> = x.iter().map(|v| v.cast::<f16>()).collect();
    assert_eq!(out, want);
    let mut back = vec![0.0f32; 4];
    cast::map(&out, &mut back).unwrap();
    assert_eq!(back[1], -2.5);
    // Integers and bools convert as `Element::cast` does: saturating, NaN to 0, wrapping
    // between integers.
    let f = [f32::NAN, -1e10, 300.7, -0.9, 0.0, 2.5];
    let mut as_u8 = vec![0u8; 6];
    cast::map(&f, &mut as_u8).unwrap();
    assert_eq!(as_u8, f.iter().map(|v| v.cast::<u8>()).collect::<Vec<_>>());
    let mut as_bool = vec![false; 6];
    cast::map(&f, &mut as_bool).unwrap();
    assert_eq!(as_bool, vec![true, true, true, true, false, true]);
    let big = [i64::MAX, -1, 1 << 40 | 300];
    let mut as_i32 = vec![0i32; 3];
    cast::map(&big, &mut as_i32).unwrap();
    assert_eq!(
        as_i32,
        big.iter().map(|v| v.cast::<i32>()).collect::<Vec<_>>()
    );
    let mut as_f32 = vec![0.0f32; 3];
    cast::map(&big, &mut as_f32).unwrap();
    assert_eq!(
        as_f32,
        big.iter().map(|v| v.cast::<f32>()).collect::<Vec<_>>()
    );
}
