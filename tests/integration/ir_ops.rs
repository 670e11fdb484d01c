//! `Graph::backward` of single ops against the static gradients the compiled path calls for
//! the same tensor method (`vjp1`): both go through one rule per op (`rtx/src/rules`),
//! so the IR's gradient is bitwise the static one, op by op, and so is its output.

use rtx::compile::grad::{vjp1, vjp2};
use rtx::ir::{Attrs, Builder, DynTensor, Graph, IrOp, Params, Value};
use rtx::nn::CrossEntropy;
use rtx::op::Op;
use rtx::op::{ReduceOp, ScatterOp};
use rtx::prelude::*;
use rtx::shape::Shape;

type X = Rank2<3, 4>;

/// Inputs with a zero and a tie in row 1 (the product's and the extremes' special cases).
fn input() -> Tensor<X> {
    let v = [
        0.5, -1.25, 2.0, 0.75, //
        1.5, 0.0, 2.0, 1.5, //
        -0.5, 3.0, 2.0, -2.25,
    ];
    Tensor::from_vec(v.to_vec(), (Const, Const), Device::Cpu)
}

/// Asserts that the one-op graph `build` makes runs forward and back bitwise as the static
/// gradient `stat` of the same method, under a seed whose entries all differ (so a gradient
/// sent to the wrong place shows).
#[track_caller]
fn check<T: Shape, B>(
    what: &str,
    build: impl FnOnce(&mut Builder, Value<X, f32>) -> Value<T, f32>,
    stat: impl FnOnce(&Tensor<X>) -> (Tensor<T>, B),
) where
    B: FnOnce(&Tensor<T>, [bool; 1]) -> Option<Tensor<X>>,
{
    let mut b = Builder::new("Op");
    let x = b.input::<X, f32>("x");
    let y = build(&mut b, x);
    b.output(y);
    let graph = b.finish();

    let (y, backward) = stat(&input());
    let n = y.numel();
    let v: Vec<f32> = (0..n).map(|k| 0.25 + 0.5 * k as f32).collect();
    let seed = Tensor::from_vec(v, y.shape(), Device::Cpu);
    let want = backward(&seed, [true]).unwrap_or_else(|| panic!("{what}: no static gradient"));

    let inputs = [("x", DynTensor::of(&input()))];
    let back = graph.backward(&inputs, &Params::new(), &[DynTensor::of(&seed)]);
    let back = back.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        back.outputs[0].to_bits(),
        DynTensor::of(&y).to_bits(),
        "{what}: outputs"
    );
    let dx = back
        .inputs
        .get("x")
        .unwrap_or_else(|| panic!("{what}: no IR gradient"));
    let want = DynTensor::of(&want);
    assert_eq!(dx.dims(), want.dims(), "{what}: gradient dims");
    let (got, wanted) = (dx.to_f64_vec(), want.to_f64_vec());
    assert_eq!(
        dx.to_bits(),
        want.to_bits(),
        "{what}: IR {got:?}, static {wanted:?}"
    );
}

#[test]
fn softmax_along_a_leading_axis_differentiates_as_compiled() {
    check(
        "softmax::<0>",
        |b, x| b.softmax::<0, _, _>(x),
        |x| vjp1(x, &|x| x.softmax::<0>()),
    );
    check(
        "log_softmax::<0>",
        |b, x| b.log_softmax::<0, _, _>(x),
        |x| vjp1(x, &|x| x.log_softmax::<0>()),
    );
    check(
        "softmax::<1>",
        |b, x| b.softmax::<1, _, _>(x),
        |x| vjp1(x, &|x| x.softmax::<1>()),
    );
}

#[test]
fn means_and_reductions_differentiate_as_compiled() {
    check(
        "mean::<1>",
        |b, x| b.mean::<1, _, _>(x),
        |x| vjp1(x, &|x| x.mean::<1>()),
    );
    check(
        "mean_keepdim::<0>",
        |b, x| b.mean_keepdim::<0, _, _>(x),
        |x| vjp1(x, &|x| x.mean_keepdim::<0>()),
    );
    let sum = |b: &mut Builder, x| b.reduce::<1, _, _>(x, ReduceOp::Sum);
    check("sum::<1>", sum, |x| vjp1(x, &|x| x.sum::<1>()));
    let max = |b: &mut Builder, x| b.reduce::<1, _, _>(x, ReduceOp::Max);
    check("max::<1> (a tie in row 1)", max, |x| {
        vjp1(x, &|x| x.max::<1>())
    });
    let min = |b: &mut Builder, x| b.reduce_keepdim::<0, _, _>(x, ReduceOp::Min);
    check("min_keepdim::<0>", min, |x| {
        vjp1(x, &|x| x.min_keepdim::<0>())
    });
    let prod = |b: &mut Builder, x| b.reduce::<1, _, _>(x, ReduceOp::Prod);
    check("prod::<1> (a zero in row 1)", prod, |x| {
        vjp1(x, &|x| x.prod::<1>())
    });
}

#[test]
fn narrow_differentiates_as_compiled() {
    let narrow = |b: &mut Builder, x| b.narrow::<1, Const<2>, _, _>(x, 1);
    check("narrow::<1>(1, 2)", narrow, |x| {
        vjp1(x, &|x| x.narrow::<1, Const<2>>(1, Const))
    });
}

#[test]
fn concat_hands_each_input_its_part_of_the_gradient() {
    // `x` concatenated with itself: its gradient is the sum of the two parts, as the static
    // backward's two gradients add.
    let mut b = Builder::new("Cat");
    let x = b.input::<X, f32>("x");
    let y =
        b.node_with::<Rank2<6, 4>, f32>(IrOp::Op(Op::Concat), Attrs::axis(0), &[x.id(), x.id()]);
    b.output(y);
    let graph = b.finish();

    let (y, backward) = vjp2(&input(), &input(), &|a, b| a.concat::<0, Const<6>>(b));
    let v: Vec<f32> = (0..24).map(|k| 0.25 + 0.5 * k as f32).collect();
    let seed = Tensor::from_vec(v, y.shape(), Device::Cpu);
    let (da, db) = backward(&seed, [true, true]);
    let want = DynTensor::of(&(&da.unwrap() + &db.unwrap()));

    let inputs = [("x", DynTensor::of(&input()))];
    let back = graph.backward(&inputs, &Params::new(), &[DynTensor::of(&seed)]);
    let back = back.unwrap();
    assert_eq!(back.outputs[0].to_bits(), DynTensor::of(&y).to_bits());
    let dx = back.inputs.get("x").unwrap();
    assert_eq!(
        dx.to_bits(),
        want.to_bits(),
        "IR {:?}, static {:?}",
        dx.to_f64_vec(),
        want.to_f64_vec()
    );
}

/// The gradients `Graph::backward` gives the inputs `x` and `y` of `graph` under a seed,
/// against those the tape records for the same op (`tape`), which runs the same rule: bitwise.
#[track_caller]
fn same_as_tape(
    what: &str,
    graph: &rtx::ir::Graph,
    (x, y): (&Tensor<X>, &Tensor<X>),
    tape: impl FnOnce(&Tensor<X>, &Tensor<X>) -> Tensor<X>,
) {
    let (xt, yt) = (x.detach().requires_grad(), y.detach().requires_grad());
    let out = tape(&xt, &yt);
    let v: Vec<f32> = (0..out.numel()).map(|k| 0.25 + 0.5 * k as f32).collect();
    let seed = Tensor::from_vec(v, out.shape(), Device::Cpu);
    // d sum(out * seed) / d out is the seed, exactly (ones times the seed).
    let grads = (&out * &seed).sum_all().backward();
    let inputs = [("x", DynTensor::of(x)), ("y", DynTensor::of(y))];
    let back = graph.backward(&inputs, &Params::new(), &[DynTensor::of(&seed)]);
    let back = back.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(
        back.outputs[0].to_bits(),
        DynTensor::of(&out).to_bits(),
        "{what}: outputs"
    );
    for (name, t) in [("x", &xt), ("y", &yt)] {
        let want = DynTensor::of(&grads.get(t).unwrap_or_else(|| panic!("{what}: no d{name}")));
        let got = back
            .inputs
            .get(name)
            .unwrap_or_else(|| panic!("{what}: no IR d{name}"));
        assert_eq!(
            got.to_bits(),
            want.to_bits(),
            "{what}: d{name}: IR {:?}, tape {:?}",
            got.to_f64_vec(),
            want.to_f64_vec()
        );
    }
}

#[test]
fn where_and_masked_fill_differentiate_as_the_tape() {
    use rtx::op::CmpOp;
    let y = &input() * 0.5 - 0.25;
    // `x.where_cond(x > 0, y)`: x's gradient where x > 0, y's elsewhere.
    let mut b = Builder::new("Where");
    let (xv, yv) = (b.input::<X, f32>("x"), b.input::<X, f32>("y"));
    let zero = b.constant::<f32>(0.0);
    let mask = b.compare(xv, zero, CmpOp::Gt);
    let out = b.where_cond(xv, mask, yv);
    b.output(out);
    let graph = b.finish();
    same_as_tape("where_cond", &graph, (&input(), &y), |x, y| {
        x.where_cond(&x.detach().gt(0.0), y)
    });
    // `x.masked_fill(x > 0, -1) * y`: x's gradient where x <= 0, zero elsewhere.
    let mut b = Builder::new("MaskedFill");
    let (xv, yv) = (b.input::<X, f32>("x"), b.input::<X, f32>("y"));
    let zero = b.constant::<f32>(0.0);
    let mask = b.compare(xv, zero, CmpOp::Gt);
    let fill = b.constant::<f32>(-1.0);
    let filled = b.node::<X, f32>(IrOp::Op(Op::Where), &[mask.id(), fill.id(), xv.id()]);
    let out = b.binary(filled, yv, rtx::op::BinaryOp::Mul);
    b.output(out);
    let graph = b.finish();
    same_as_tape("masked_fill", &graph, (&input(), &y), |x, y| {
        x.masked_fill(&x.detach().gt(0.0), -1.0) * y
    });
}

#[test]
fn pow_of_two_tensors_differentiates_as_its_derivative_kernels() {
    // A positive base, so both gradients are finite.
    let base = input().abs() + 0.5;
    let exponent = &input() * 0.75 + 0.5;
    let mut b = Builder::new("Pow");
    let (xv, yv) = (b.input::<X, f32>("x"), b.input::<X, f32>("y"));
    let out = b.binary(xv, yv, rtx::op::BinaryOp::Pow);
    b.output(out);
    let graph = b.finish();
    // A chain's backward is its derivative kernels' arithmetic (what a fused chain of the
    // compiled path runs): a kernel of `powf` applied by `map2` records exactly those.
    same_as_tape("pow", &graph, (&base, &exponent), |x, y| {
        rtx::kernel::map2(power::Op, x, y, &[])
    });
}

/// `a ^ b` as a fused chain computes it, with the derivatives `#[kernel]` derives.
#[rtx::kernel(elementwise)]
fn power<T: Float>(a: T, b: T) -> T {
    a.powf(b)
}

#[test]
fn gather_differentiates_as_the_tape() {
    // Along axis 1, with repeated indices in a row (their gradients add) and a column never
    // read (its gradient is zero).
    let ids: Vec<i64> = vec![0, 0, 3, 1, 2, 2, 2, 0, 3, 1, 1, 3];
    let idx: Tensor<X, i64> = Tensor::from_vec(ids, (Const, Const), Device::Cpu);
    let mut b = Builder::new("Gather");
    let xv = b.input::<X, f32>("x");
    let iv = b.input::<X, i64>("idx");
    let out = b.node_with::<X, f32>(IrOp::Op(Op::Gather), Attrs::axis(1), &[xv.id(), iv.id()]);
    b.output(out);
    let graph = b.finish();

    let xt = input().requires_grad();
    let y = xt.gather::<1, X>(&idx);
    let v: Vec<f32> = (0..y.numel()).map(|k| 0.25 + 0.5 * k as f32).collect();
    let seed = Tensor::from_vec(v, y.shape(), Device::Cpu);
    let grads = (&y * &seed).sum_all().backward();
    let want = DynTensor::of(&grads.get(&xt).expect("the tape's dx"));

    let inputs = [("x", DynTensor::of(&input())), ("idx", DynTensor::of(&idx))];
    let back = graph.backward(&inputs, &Params::new(), &[DynTensor::of(&seed)]);
    let back = back.unwrap();
    assert_eq!(back.outputs[0].to_bits(), DynTensor::of(&y).to_bits());
    let dx = back.inputs.get("x").expect("the IR's dx");
    assert_eq!(
        dx.to_bits(),
        want.to_bits(),
        "IR {:?}, tape {:?}",
        dx.to_f64_vec(),
        want.to_f64_vec()
    );
    // Row 0 read column 0 twice (seeds 0.25 and 0.75 add) and column 2 never.
    assert_eq!(want.to_f64_vec()[..3], [1.0, 1.75, 0.0]);
}

#[test]
fn scatter_and_scatter_add_differentiate_as_the_tape() {
    // Into x [3, 4] along axis 1 from a source [3, 3] through an index [3, 2] (the source is
    // larger than the index: its last column is never written, so its gradient is zero).
    // `scatter` writes distinct columns per row (x's gradient is zero there); `scatter_add`
    // repeats one (both source gradients read the same place).
    for (kind, ids) in [
        (ScatterOp::Set, vec![1i64, 3, 0, 2, 2, 1]),
        (ScatterOp::Add, vec![1i64, 1, 0, 3, 2, 2]),
    ] {
        type I = Rank2<3, 2>;
        type S = Rank2<3, 3>;
        let idx: Tensor<I, i64> = Tensor::from_vec(ids, (Const, Const), Device::Cpu);
        let src_v: Vec<f32> = (0..9).map(|k| 1.0 - 0.375 * k as f32).collect();
        let src = || Tensor::<S>::from_vec(src_v.clone(), (Const, Const), Device::Cpu);
        let mut b = Builder::new("Scatter");
        let xv = b.input::<X, f32>("x");
        let iv = b.input::<I, i64>("idx");
        let sv = b.input::<S, f32>("src");
        let ids = [xv.id(), iv.id(), sv.id()];
        let out = b.node_with::<X, f32>(IrOp::Op(Op::Scatter(kind)), Attrs::axis(1), &ids);
        b.output(out);
        let graph = b.finish();

        let (xt, st) = (input().requires_grad(), src().requires_grad());
        let y = match kind {
            ScatterOp::Set => xt.scatter::<1>(&idx, &st),
            ScatterOp::Add => xt.scatter_add::<1>(&idx, &st),
        };
        let v: Vec<f32> = (0..y.numel()).map(|k| 0.25 + 0.5 * k as f32).collect();
        let seed = Tensor::from_vec(v, y.shape(), Device::Cpu);
        let grads = (&y * &seed).sum_all().backward();

        let inputs = [
            ("x", DynTensor::of(&input())),
            ("idx", DynTensor::of(&idx)),
            ("src", DynTensor::of(&src())),
        ];
        let back = graph
            .backward(&inputs, &Params::new(), &[DynTensor::of(&seed)])
            .unwrap();
        assert_eq!(
            back.outputs[0].to_bits(),
            DynTensor::of(&y).to_bits(),
            "{kind:?}"
        );
        let dx = DynTensor::of(&grads.get(&xt).expect("the tape's dx"));
        let dsrc = DynTensor::of(&grads.get(&st).expect("the tape's dsrc"));
        for (name, want) in [("x", &dx), ("src", &dsrc)] {
            let got = back.inputs.get(name).expect("the IR's gradient");
            assert_eq!(got.to_bits(), want.to_bits(), "{kind:?} d{name}");
        }
        let (dx, dsrc) = (dx.to_f64_vec(), dsrc.to_f64_vec());
        match kind {
            // Row 0 wrote columns 1 and 3: x's gradient is zero there, the seed elsewhere.
            ScatterOp::Set => assert_eq!(dx[..4], [0.25, 0.0, 1.25, 0.0]),
            // scatter_add passes the seed through to x whole.
            ScatterOp::Add => assert_eq!(dx[..4], [0.25, 0.75, 1.25, 1.75]),
        }
        // Source row 0 read back the seed at its index; its third column was never written.
        let want0 = match kind {
            ScatterOp::Set => [0.75, 1.75, 0.0],
            ScatterOp::Add => [0.75, 0.75, 0.0],
        };
        assert_eq!(dsrc[..3], want0, "{kind:?}");
    }
}

#[test]
fn cross_entropy_runs_and_differentiates_as_the_static_loss() {
    // Logits [4, 3] against targets with one ignored row, with label smoothing: the IR's loss
    // and logits' gradient bitwise the static loss's (the same fused kernels), and the node
    // survives a round trip through the serialized form.
    type L = Rank2<4, 3>;
    let opts = CrossEntropy {
        ignore_index: Some(-100),
        label_smoothing: 0.125,
    };
    let v: Vec<f32> = (0..12).map(|k| (k as f32 * 0.7).sin() * 2.0).collect();
    let logits: Tensor<L> = Tensor::from_vec(v, (Const, Const), Device::Cpu);
    let targets: Tensor<Rank1<4>, i64> = Tensor::from_array([2, -100, 0, 1], Device::Cpu);
    let mut b = Builder::new("Loss");
    let x = b.input::<L, f32>("logits");
    let t = b.input::<Rank1<4>, i64>("targets");
    let loss = b.cross_entropy(x, t, opts);
    b.output(loss);
    let graph = Graph::from_json(&b.finish().to_json()).unwrap();

    let (want, backward) = rtx::compile::loss::cross_entropy_with(&logits, &targets, opts);
    let seed = Tensor::<()>::from_vec(vec![1.5], (), Device::Cpu);
    let want_dx = backward(&seed);
    let inputs = [
        ("logits", DynTensor::of(&logits)),
        ("targets", DynTensor::of(&targets)),
    ];
    let back = graph
        .backward(&inputs, &Params::new(), &[DynTensor::of(&seed)])
        .unwrap();
    assert_eq!(back.outputs[0].to_bits(), DynTensor::of(&want).to_bits());
    let dx = back.inputs.get("logits").expect("the IR's gradient");
    assert_eq!(dx.to_bits(), DynTensor::of(&want_dx).to_bits());
    // The ignored row gets no gradient; the kept rows' gradients sum to zero.
    let g = dx.to_f64_vec();
    assert_eq!(g[3..6], [0.0, 0.0, 0.0]);
    assert!(g[..3].iter().sum::<f64>().abs() < 1e-6);
}

#[test]
fn cross_entropy_nodes_check_their_targets() {
    // f32 targets, and mismatched rows, are errors naming the node.
    let mut b = Builder::new("Loss");
    let x = b.input::<Rank2<4, 3>, f32>("logits");
    let t = b.input::<Rank1<4>, f32>("targets");
    let op = IrOp::Composite(rtx::ir::Composite::CrossEntropy {
        ignore_index: None,
        label_smoothing: 0.0,
    });
    let loss = b.node_with::<(), f32>(op.clone(), Attrs::default(), &[x.id(), t.id()]);
    b.output(loss);
    let err = b.finish().validate().unwrap_err().to_string();
    assert!(err.contains("not i64 class indices"), "{err}");
    let mut b = Builder::new("Loss");
    let x = b.input::<Rank2<4, 3>, f32>("logits");
    let t = b.input::<Rank1<5>, i64>("targets");
    let loss = b.node_with::<(), f32>(op, Attrs::default(), &[x.id(), t.id()]);
    b.output(loss);
    let err = b.finish().validate().unwrap_err().to_string();
    assert!(err.contains("are not [B, C] and [B]"), "{err}");
}
