//! The tape's backward on every device: gradients of the elementwise ops, reductions, row
//! kernels, matmul, indexing and the losses, and whole training steps (SGD, Adam, AdamW,
//! clipping), each compared with the CPU backend's.

use super::elementwise::apply;
use super::*;
use rtx::Gradients;
use rtx::op::UnaryOp;

/// The gradient of `of` as f64s, panicking with the op's name when it has none.
fn grad<S: Shape, E: Float>(grads: &Gradients, of: &Tensor<S, E>, name: &str) -> Vec<f64> {
    let g = grads
        .get(of)
        .unwrap_or_else(|| panic!("{name}: no gradient reached the input"));
    f64s(&g)
}

/// `Σ y * w`: a scalar whose gradient with respect to `y` is `w`, so each output element
/// sends back a different weight. (A macro: the operator's shape bound differs per shape.)
macro_rules! weighted {
    ($y:expr, $w:expr) => {
        ($y * $w).sum_all()
    };
}

fn unary_backward_case<E: Float>() {
    let (r, c) = (9usize, 37usize);
    // Positive and away from 0, so every op (log, sqrt, rsqrt, ...) is smooth here.
    let data = values::<E>(r * c, 21, 0.2, 2.0);
    let wd = values::<E>(r * c, 22, -1.0, 1.0);
    on_every_device::<E>("unary backward", |dev| {
        let w = Tensor::from_vec(wd.clone(), (r, c), dev);
        UnaryOp::ALL
            .iter()
            .map(|&op| {
                let name = op.name();
                let x = Tensor::from_vec(data.clone(), (r, c), dev).requires_grad();
                let g = weighted!(apply(op, &x), &w).backward();
                (format!("d {name}"), grad(&g, &x, name))
            })
            .collect()
    });
}

#[test]
fn unary_backward_matches_the_cpu() {
    every_float!(unary_backward_case);
}

fn binary_backward_case<E: Float>() {
    let (r, c) = (11usize, 29usize);
    let a = values::<E>(r * c, 23, -2.0, 2.0);
    let b = values::<E>(r * c, 24, 0.5, 2.0);
    let row = values::<E>(c, 25, 0.5, 2.0);
    let wd = values::<E>(r * c, 26, -1.0, 1.0);
    on_every_device::<E>("binary backward", |dev| {
        let w = Tensor::from_vec(wd.clone(), (r, c), dev);
        let mut out = Outputs::new();
        type RowOp<E> =
            fn(&Tensor<(usize, usize), E>, &Tensor<(usize,), E>) -> Tensor<(usize, usize), E>;
        let cases: [(&str, RowOp<E>); 5] = [
            ("add row", |x, v| x + v),
            ("sub row", |x, v| x - v),
            ("mul row", |x, v| x * v),
            ("div row", |x, v| x / v),
            ("maximum row", |x, v| x.maximum(v)),
        ];
        for (name, f) in cases {
            let x = Tensor::from_vec(a.clone(), (r, c), dev).requires_grad();
            let v = Tensor::from_vec(row.clone(), (c,), dev).requires_grad();
            let g = weighted!(f(&x, &v), &w).backward();
            out.push((format!("{name} dx"), grad(&g, &x, name)));
            out.push((format!("{name} dv (summed over rows)"), grad(&g, &v, name)));
        }
        let x = Tensor::from_vec(a.clone(), (r, c), dev).requires_grad();
        let y = Tensor::from_vec(b.clone(), (r, c), dev).requires_grad();
        let g = weighted!(y.pow(&x), &w).backward();
        out.push(("pow dbase".into(), grad(&g, &y, "pow")));
        out.push(("pow dexp".into(), grad(&g, &x, "pow")));
        let g = weighted!((&x.t() * &y.t()).t(), &w).backward();
        out.push(("mul transposed dx".into(), grad(&g, &x, "mul")));
        out
    });
}

#[test]
fn binary_backward_broadcasts_and_matches_the_cpu() {
    every_float!(binary_backward_case);
}

fn reduce_backward_case<E: Float>() {
    let (r, c) = (13usize, 41usize);
    let data = values::<E>(r * c, 27, -3.0, 3.0);
    let wr = values::<E>(r, 28, -1.0, 1.0);
    let wc = values::<E>(c, 29, -1.0, 1.0);
    let wm = values::<E>(r * c, 30, -1.0, 1.0);
    on_every_device::<E>("reduce backward", |dev| {
        let rows = Tensor::from_vec(wr.clone(), (r,), dev);
        let cols = Tensor::from_vec(wc.clone(), (c,), dev);
        let whole = Tensor::from_vec(wm.clone(), (r, c), dev);
        let x = || Tensor::from_vec(data.clone(), (r, c), dev).requires_grad();
        let mut out = Outputs::new();
        let mut add = |name: &str, x: &Tensor<(usize, usize), E>, loss: Tensor<(), E>| {
            out.push((format!("d {name}"), grad(&loss.backward(), x, name)));
        };
        let t = x();
        add("sum 1", &t, weighted!(t.sum::<1>(), &rows));
        let t = x();
        add("mean 0", &t, weighted!(t.mean::<0>(), &cols));
        let t = x();
        add("max 1", &t, weighted!(t.max::<1>(), &rows));
        let t = x();
        add("min 0", &t, weighted!(t.min::<0>(), &cols));
        let t = x();
        add("var 1", &t, weighted!(t.var::<1>(1), &rows));
        let t = x();
        add("std 0", &t, weighted!(t.std::<0>(1), &cols));
        let t = x();
        add("logsumexp 1", &t, weighted!(t.logsumexp::<1>(), &rows));
        let t = x();
        add("softmax 1", &t, weighted!(t.softmax::<1>(), &whole));
        let t = x();
        add("log_softmax 1", &t, weighted!(t.log_softmax::<1>(), &whole));
        let t = x();
        add("softmax 0", &t, weighted!(t.softmax::<0>(), &whole));
        let t = x();
        add("mean_all", &t, t.mean_all());
        out
    });
}

#[test]
fn reduction_and_softmax_backward_match_the_cpu() {
    every_float!(reduce_backward_case);
}

fn matmul_backward_case<E: Float>() {
    let (m, k, n) = (17usize, 23usize, 9usize);
    let a = values::<E>(m * k, 31, -1.0, 1.0);
    let b = values::<E>(k * n, 32, -1.0, 1.0);
    let w = values::<E>(m * n, 33, -1.0, 1.0);
    on_every_device::<E>("matmul backward", |dev| {
        let x = Tensor::from_vec(a.clone(), (m, k), dev).requires_grad();
        let y = Tensor::from_vec(b.clone(), (k, n), dev).requires_grad();
        let wt = Tensor::from_vec(w.clone(), (m, n), dev);
        let g = weighted!(x.matmul(&y), &wt).backward();
        // The transposed operand is how Linear uses its weight.
        let yt = Tensor::from_vec(b.clone(), (n, k), dev).requires_grad();
        let g2 = weighted!(x.matmul(&yt.t()), &wt).backward();
        vec![
            ("dx".into(), grad(&g, &x, "matmul")),
            ("dy".into(), grad(&g, &y, "matmul")),
            ("dx with y transposed".into(), grad(&g2, &x, "matmul")),
            ("dy transposed".into(), grad(&g2, &yt, "matmul")),
        ]
    });
}

#[test]
fn matmul_backward_matches_the_cpu() {
    every_float!(matmul_backward_case);
}

/// A Linear's weight gradient `Gᵀ X` with its bias gradient, `G`'s column sums, from one call:
/// tall enough for cuBLASLt's epilogue (one launch on a GPU, checked) and, in 16-bit types,
/// too narrow for it (a product and a separate sum).
fn matmul_row_sums_case<E: Float>() {
    let (n, i) = (70usize, 40usize);
    for o in [300usize, 10] {
        let gv = values::<E>(n * o, 36, -1.0, 1.0);
        let xv = values::<E>(n * i, 37, -1.0, 1.0);
        on_every_device::<E>(&format!("matmul_row_sums, {o} rows"), |dev| {
            let g = Storage::from_vec(gv.clone(), dev).unwrap();
            let x = Storage::from_vec(xv.clone(), dev).unwrap();
            // Gᵀ is a transposed view of the dense [n, o] gradient, as the backward sees it.
            let lgt = rtx_backends::Layout::contiguous(&[n, o]).transpose(0, 1);
            let lx = rtx_backends::Layout::contiguous(&[n, i]);
            let before = rtx::launch_count(dev);
            let (w, b) = g.matmul_row_sums(&lgt, &x, &lx).unwrap();
            let launches = rtx::launch_count(dev) - before;
            if dev != Device::Cpu {
                println!(
                    "matmul_row_sums {:?} {o} rows on {dev:?}: {launches} launches",
                    E::DTYPE
                );
                let epilogue = match E::DTYPE {
                    DType::F32 => true,
                    DType::F16 | DType::BF16 => o >= 128,
                    _ => false,
                };
                if epilogue {
                    assert_eq!(
                        launches,
                        1,
                        "{:?}: the sums should come from the epilogue",
                        E::DTYPE
                    );
                } else {
                    assert!(
                        launches >= 2,
                        "{:?}: a product and a sum, got {launches}",
                        E::DTYPE
                    );
                }
            }
            let f = |s: &Storage<E>, dims: &[usize]| -> Vec<f64> {
                let l = rtx_backends::Layout::contiguous(dims);
                s.to_vec(&l).into_iter().map(|v| v.to_f64()).collect()
            };
            vec![
                ("weight".into(), f(&w, &[o, i])),
                ("bias".into(), f(&b, &[o])),
            ]
        });
    }
}

#[test]
fn matmul_row_sums_match_the_cpu() {
    every_float!(matmul_row_sums_case);
}

/// A Linear's forward `X Wᵀ + b` from one call: on a GPU the bias is added by cuBLASLt's
/// epilogue (one launch, checked, for the types it takes), and a bias it cannot read (here,
/// at an odd offset) is added after the product.
fn matmul_bias_case<E: Float>() {
    let (n, i, o) = (70usize, 40usize, 300usize);
    let xv = values::<E>(n * i, 38, -1.0, 1.0);
    let wv = values::<E>(o * i, 39, -1.0, 1.0);
    let bv = values::<E>(o + 1, 40, -1.0, 1.0);
    on_every_device::<E>("matmul_bias", |dev| {
        let x = Storage::from_vec(xv.clone(), dev).unwrap();
        let w = Storage::from_vec(wv.clone(), dev).unwrap();
        let b = Storage::from_vec(bv.clone(), dev).unwrap();
        let lx = rtx_backends::Layout::contiguous(&[n, i]);
        let lwt = rtx_backends::Layout::contiguous(&[o, i]).transpose(0, 1);
        let mut out = Outputs::new();
        for offset in [0usize, 1] {
            let lb = rtx_backends::Layout::contiguous(&[o]).with_offset(offset);
            let before = rtx::launch_count(dev);
            let y = x.matmul_bias(&lx, &w, &lwt, &b, &lb).unwrap();
            let launches = rtx::launch_count(dev) - before;
            if dev != Device::Cpu {
                println!(
                    "matmul_bias {:?} offset {offset} on {dev:?}: {launches} launches",
                    E::DTYPE
                );
                if offset == 0 && E::DTYPE != DType::F64 {
                    assert_eq!(
                        launches,
                        1,
                        "{:?}: the bias should be the epilogue's",
                        E::DTYPE
                    );
                }
                if offset == 1 {
                    assert_eq!(launches, 2, "{:?}: a product, then the add", E::DTYPE);
                }
            }
            let l = rtx_backends::Layout::contiguous(&[n, o]);
            let v = y.to_vec(&l).into_iter().map(|v| v.to_f64()).collect();
            out.push((format!("offset {offset}"), v));
        }
        out
    });
}

/// `Linear::forward_act` on every device: the bits of `forward` followed by the activation's
/// method, at inference (where the CPU applies it to blocks of rows in cache; 700 rows of 100
/// cross several blocks) and with a tape (the two ops recorded: the gradients are the
/// composition's); the outputs close to the CPU's on a GPU.
fn linear_act_case<E: Float>() {
    let xv = values::<E>(7 * 100 * 40, 41, -2.0, 2.0);
    let wd = values::<E>(7 * 100 * 100, 42, -1.0, 1.0);
    on_every_device::<E>("linear_act", |dev| {
        let mut fc = Linear::<40, 100, E>::new(dev, 7);
        fc.bias = Some(fc.bias.unwrap() + E::from_f64(0.25));
        let x: Tensor<Rank3<7, 100, 40>, E> =
            Tensor::from_vec(xv.clone(), (Const, Const, Const), dev);
        let mut out = Outputs::new();
        for act in [UnaryOp::Gelu, UnaryOp::Relu, UnaryOp::Silu] {
            let fused = fc.forward_act(&x, act);
            let plain = fc.forward(&x).try_unary_op(act).unwrap();
            assert_eq!(bits(&fused), bits(&plain), "{act:?} at inference on {dev}");
            out.push((format!("{act:?}"), f64s(&fused)));
        }
        // With a tape: the gradients of x, the weight and the bias are the composition's.
        let w: Tensor<Rank3<7, 100, 100>, E> =
            Tensor::from_vec(wd.clone(), (Const, Const, Const), dev);
        let xg = x.requires_grad();
        let mut fg = fc.clone();
        fg.weight = fg.weight.requires_grad();
        fg.bias = fg.bias.map(|b| b.requires_grad());
        let g1 = weighted!(fg.forward_act(&xg, UnaryOp::Gelu), &w).backward();
        let g2 = weighted!(fg.forward(&xg).gelu(), &w).backward();
        for (name, a, b) in [
            ("x", grad(&g1, &xg, "x"), grad(&g2, &xg, "x")),
            (
                "weight",
                grad(&g1, &fg.weight, "w"),
                grad(&g2, &fg.weight, "w"),
            ),
            (
                "bias",
                grad(&g1, fg.bias.as_ref().unwrap(), "b"),
                grad(&g2, fg.bias.as_ref().unwrap(), "b"),
            ),
        ] {
            assert_eq!(a, b, "the gradient of {name} on {dev}");
            // The weight and bias gradients are sums over all 700 rows, where cancellation
            // leaves some elements far smaller than their terms: f32 accumulated in another
            // order (cuBLAS's split of the reduction) differs there by a few ulps of the
            // terms, not of the result. So they are compared norm-wise, as GEMM results
            // are: each divided by the largest magnitude the device computed.
            let a = match name {
                "x" => a,
                _ => {
                    let top = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
                    a.iter().map(|v| v / top).collect()
                }
            };
            out.push((format!("grad {name}"), a));
        }
        out
    });
}

#[test]
fn linear_act_is_the_layer_then_the_activation() {
    every_float!(linear_act_case);
}

#[test]
fn matmul_bias_matches_the_cpu() {
    every_float!(matmul_bias_case);
}

fn index_backward_case<E: Float>() {
    let (vocab, dim) = (12usize, 7usize);
    let table = values::<E>(vocab * dim, 34, -1.0, 1.0);
    // Repeats, so the backward has to add rows together.
    let ids: Vec<i64> = vec![3, 0, 11, 3, 5, 3, 0, 7];
    let w = values::<E>(ids.len() * dim, 35, -1.0, 1.0);
    on_every_device::<E>("index_select backward", |dev| {
        let t = Tensor::from_vec(table.clone(), (vocab, dim), dev).requires_grad();
        let i = Tensor::from_vec(ids.clone(), (ids.len(),), dev);
        let wt = Tensor::from_vec(w.clone(), (ids.len(), dim), dev);
        let g = weighted!(t.index_select::<0, usize>(&i), &wt).backward();
        vec![("d table".into(), grad(&g, &t, "index_select"))]
    });
}

#[test]
fn index_select_backward_matches_the_cpu() {
    every_float!(index_backward_case);
}

fn loss_case<E: Float>() {
    let (b, c) = (16usize, 10usize);
    let logits = values::<E>(b * c, 36, -3.0, 3.0);
    let other = values::<E>(b * c, 37, -1.0, 1.0);
    let bits = values::<E>(b * c, 38, 0.0, 1.0);
    let labels: Vec<i64> = (0..b as i64).map(|i| (i * 7 + 3) % c as i64).collect();
    let mut ignoring = labels.clone();
    ignoring[5] = -100;
    on_every_device::<E>("losses", |dev| {
        let y = Tensor::from_vec(labels.clone(), (b,), dev);
        let yi = Tensor::from_vec(ignoring.clone(), (b,), dev);
        let t = Tensor::from_vec(other.clone(), (b, c), dev);
        let p = Tensor::from_vec(bits.clone(), (b, c), dev)
            .ge(E::from_f64(0.5))
            .cast::<E>();
        let x = || Tensor::from_vec(logits.clone(), (b, c), dev).requires_grad();
        let mut out = Outputs::new();
        let mut add = |name: &str, x: &Tensor<(usize, usize), E>, loss: Tensor<(), E>| {
            out.push((format!("{name} value"), f64s(&loss)));
            out.push((format!("d {name}"), grad(&loss.backward(), x, name)));
        };
        let l = x();
        add("cross_entropy", &l, cross_entropy(&l, &y));
        let l = x();
        let opts = CrossEntropy {
            ignore_index: Some(-100),
            label_smoothing: 0.1,
        };
        add(
            "cross_entropy ignore + smoothing",
            &l,
            cross_entropy_with(&l, &yi, opts),
        );
        let l = x();
        add("nll", &l, nll_loss(&l.log_softmax::<1>(), &y));
        let l = x();
        add("mse", &l, mse_loss(&l, &t));
        let l = x();
        add("l1", &l, l1_loss(&l, &t));
        let l = x();
        add(
            "bce with logits",
            &l,
            binary_cross_entropy_with_logits(&l, &p),
        );
        out
    });
}

#[test]
fn losses_and_their_gradients_match_the_cpu() {
    every_float!(loss_case);
}

/// A small MLP whose parameters are the same on every device.
#[model]
struct Net {
    hidden: Linear<12, 32>,
    out: Linear<32, 5>,
}

/// The parameters of a [`Net`] after `steps` training steps on `dev` with the optimizer
/// `opt`, clipping the gradients to a global norm of 0.5 when `clip`.
fn trained(dev: Device, opt: &mut impl Optimizer, steps: usize, clip: bool) -> Outputs {
    let mut net = Net {
        hidden: Linear::new(Device::Cpu, 3),
        out: Linear::new(Device::Cpu, 4),
    };
    net.move_to(dev);
    net.track_gradients();
    let x = Tensor::from_vec(
        values::<f32>(64 * 12, 39, -2.0, 2.0),
        (64usize, Const::<12>),
        dev,
    );
    let labels: Vec<i64> = (0..64).map(|i| (i * 3 % 5) as i64).collect();
    let y = Tensor::from_vec(labels, (64usize,), dev);
    let mut out = Outputs::new();
    for step in 0..steps {
        let h = net.hidden.forward(&x).relu();
        let loss = cross_entropy(&net.out.forward(&h), &y);
        out.push((format!("loss {step}"), f64s(&loss)));
        let mut grads = loss.backward();
        if clip {
            let norm = clip_grad_norm(&mut grads, &net, 0.5);
            out.push((format!("grad norm {step}"), vec![norm]));
        }
        opt.step(&mut net, &grads);
    }
    out.push(("hidden.weight".into(), f64s(&net.hidden.weight)));
    out.push(("out.weight".into(), f64s(&net.out.weight)));
    if let (Some(hb), Some(ob)) = (&net.hidden.bias, &net.out.bias) {
        out.push(("hidden.bias".into(), f64s(hb)));
        out.push(("out.bias".into(), f64s(ob)));
    }
    out
}

#[test]
fn training_steps_match_the_cpu() {
    on_every_device::<f32>("sgd", |dev| {
        trained(
            dev,
            &mut Sgd::new(0.1).momentum(0.9).nesterov(true),
            5,
            false,
        )
    });
    on_every_device::<f32>("sgd, weight decay, clipped", |dev| {
        trained(dev, &mut Sgd::new(0.1).weight_decay(1e-2), 5, true)
    });
    on_every_device::<f32>("adam", |dev| trained(dev, &mut Adam::new(1e-2), 5, false));
    on_every_device::<f32>("adamw, clipped", |dev| {
        trained(dev, &mut AdamW::new(1e-2).weight_decay(0.1), 5, true)
    });
}

/// The fused cross entropy (one tape node: two launches forward, one backward on a GPU) over
/// class counts that are not multiples of 32 (37, and 1000, more than one block's threads),
/// a transposed view of the logits, ignored targets and label smoothing, and an output
/// gradient other than 1.
fn fused_cross_entropy_case<E: Float>() {
    for (rows, classes) in [(9usize, 37usize), (5, 1000), (300, 3)] {
        let logits = values::<E>(rows * classes, 40, -6.0, 6.0);
        let labels = indices(rows, 41, classes);
        let mut ignoring = labels.clone();
        ignoring[1] = -100;
        ignoring[rows - 1] = -100;
        on_every_device::<E>(&format!("fused cross entropy {rows}x{classes}"), |dev| {
            let mut out = Outputs::new();
            for (name, targets, opts) in [
                ("plain", &labels, CrossEntropy::default()),
                (
                    "ignore",
                    &ignoring,
                    CrossEntropy {
                        ignore_index: Some(-100),
                        label_smoothing: 0.0,
                    },
                ),
                (
                    "ignore + smoothing",
                    &ignoring,
                    CrossEntropy {
                        ignore_index: Some(-100),
                        label_smoothing: 0.25,
                    },
                ),
            ] {
                let y = Tensor::from_vec(targets.clone(), (rows,), dev);
                // Stored [classes, rows] and viewed transposed.
                let stored = Tensor::from_vec(logits.clone(), (classes, rows), dev);
                let x = stored.t().requires_grad();
                let loss = cross_entropy_with(&x, &y, opts);
                out.push((format!("{name} value"), f64s(&loss)));
                let scaled = loss * E::from_f64(2.5);
                out.push((format!("d {name}"), grad(&scaled.backward(), &x, name)));
            }
            out
        });
    }
}

#[test]
fn fused_cross_entropy_matches_the_cpu() {
    every_float!(fused_cross_entropy_case);
}

#[test]
fn cross_entropy_names_bad_targets_on_every_device() {
    same_on_every_device::<f32>("cross entropy errors", |dev| {
        let x: Tensor<(usize, usize)> = Tensor::from_vec(values(6, 42, -1.0, 1.0), (3, 2), dev);
        let mut out = Exact::new();
        for targets in [vec![0i64, 2, 5], vec![-100, 1, -3], vec![1, 0, 1]] {
            let y = Tensor::from_vec(targets.clone(), (3usize,), dev);
            let opts = CrossEntropy {
                ignore_index: Some(-100),
                label_smoothing: 0.0,
            };
            let r = try_cross_entropy_with(&x, &y, opts).map(|l| l.item());
            out.push((format!("{targets:?}"), err_text(r)));
        }
        out
    });
    if let Ok(gpus) = gpus() {
        for dev in gpus {
            let x: Tensor<(usize, usize)> = Tensor::zeros((1, 2), dev);
            let y = Tensor::from_vec(vec![2i64], (1usize,), dev);
            let e = try_cross_entropy_with(&x, &y, CrossEntropy::default());
            let msg = e.err().map(|e| e.to_string());
            assert_eq!(
                msg.as_deref(),
                Some("cross_entropy: target 2 at [0] is outside 0..2")
            );
        }
    }
}

/// What a fused cross entropy forward and backward cost in launches on each GPU: printed,
/// and held to 3 (the row kernel and the mean forward, the gradient kernel backward) plus the
/// backward walk's seed of the output gradient.
#[test]
fn cross_entropy_launch_counts() {
    let Ok(gpus) = gpus() else {
        println!("cross entropy launch counts: skipped: no CUDA device");
        return;
    };
    for dev in gpus {
        let x: Tensor<(usize, usize)> =
            Tensor::from_vec(values(64 * 10, 43, -2.0, 2.0), (64, 10), dev).requires_grad();
        let y = Tensor::from_vec(indices(64, 44, 10), (64usize,), dev);
        // Warm: kernels compiled and loaded.
        let _ = cross_entropy(&x, &y).backward();
        let before = rtx_backends::launch_count(dev);
        let loss = cross_entropy(&x, &y);
        let forward = rtx_backends::launch_count(dev) - before;
        let grads = loss.backward();
        let total = rtx_backends::launch_count(dev) - before;
        assert!(grads.get(&x).is_some());
        println!(
            "cross entropy [64, 10] on {dev}: {forward} launches forward, {} backward",
            total - forward
        );
        assert_eq!(forward, 2, "forward launches");
        assert!(
            total - forward <= 2,
            "backward launches: {}",
            total - forward
        );
    }
}
