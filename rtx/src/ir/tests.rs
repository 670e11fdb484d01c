//! Unit tests of the IR: the builder's shapes and compositions, the serialized form's round
//! trip and loader errors, the structural check, the DOT export and the summary.

use super::json::{VERSION, op_from_name};
use super::*;
use crate::shape::{Axes3, Const, Dyn};
use rtx_kernels::op::{BinaryOp, CmpOp, ReduceOp, UnaryOp};

fn sym(s: &str) -> Dim {
    Dim::Sym(s.into())
}

/// A graph that uses every typed builder method, on named, anonymous and static dims.
fn every_method() -> Graph {
    let mut b = Builder::new("Everything");
    let x = b.input::<(Dyn<'B'>, Dyn<'T'>, Const<8>), f32>("x");
    let ids = b.input::<(usize,), i64>("ids");
    let (w, bias) = b.scope("ln", |b| (b.param("weight"), b.param("bias")));
    let y = b.layer_norm(x, Some(w), Some(bias), 1e-5);
    let y = b.rms_norm(y, Some(w), 1e-6);
    let y = b.log_softmax::<2, _, _>(y);
    let m = b.mean::<1, _, _>(y); // [B, 8], divided by a run-time size
    let mk = b.mean_keepdim::<0, _, _>(m); // [1, 8]
    let e = b.broadcast_to::<(Dyn<'B'>, Const<8>), _, _>(mk);
    let d = b.binary(m, e, BinaryOp::Sub);
    let d = b.binary_scalar(d, 2.0, BinaryOp::Pow, false);
    let r = b.reshape::<(Dyn<'B'>, Const<2>, Const<4>), _, _>(d);
    let p = b.permute::<Axes3<2, 0, 1>, _, _>(r); // [4, B, 2]
    let t = b.transpose::<0, 2, _, _>(p); // [2, B, 4]
    let n = b.narrow::<2, Const<3>, _, _>(t, 1); // [2, B, 3]
    let s = b.reduce::<2, _, _>(n, ReduceOp::Max);
    let a = b.arg_reduce::<0, _, _>(s, ReduceOp::ArgMax);
    let zero = b.constant::<f32>(0.0);
    let pos = b.compare(s, zero, CmpOp::Gt);
    let neg = b.neg(s);
    let sel = b.where_cond(s, pos, neg);
    let h = b.cast::<rtx_kernels::f16, _, _>(sel);
    let ia = b.abs(ids);
    let xs = b.reduce_keepdim::<1, _, _>(x, ReduceOp::Sum);
    let xs = b.unary(xs, UnaryOp::Sigmoid);
    let proj = b_param(&mut b);
    let mm = b.matmul(x, proj);
    b.output(h);
    b.output(a);
    b.output(ia);
    b.output(xs);
    b.output(mm);
    b.finish()
}

fn b_param(b: &mut Builder) -> Value<(Const<8>, Const<5>), f32> {
    b.param("proj")
}

#[test]
fn an_mlp_chain_has_the_typed_shapes() {
    let mut b = Builder::new("Mlp");
    let x = b.input::<(Dyn<'B'>, Const<784>), f32>("x");
    let h = b.scope("fc1", |b| {
        let w = b.param::<(Const<784>, Const<256>), f32>("weight");
        let bias = b.param::<(Const<256>,), f32>("bias");
        let y = b.matmul(x, w);
        b.kernel("fused_0", |b| {
            let y = b.binary(y, bias, BinaryOp::Add);
            b.unary(y, UnaryOp::Gelu)
        })
    });
    let p = b.softmax::<1, _, _>(h);
    b.output(p);
    let g = b.finish();
    g.validate().unwrap();
    let shape = |v: NodeId| g.nodes[v].shape.clone();
    assert_eq!(shape(h.id()), [sym("B"), Dim::Static(256)]);
    assert_eq!(shape(p.id()), [sym("B"), Dim::Static(256)]);
    assert_eq!(g.nodes[h.id()].kernel.as_deref(), Some("fused_0"));
    assert_eq!(g.nodes[h.id()].scope, "fc1");
    assert_eq!(
        g.nodes[2].kernel, None,
        "a parameter is never inside a kernel"
    );
    // matmul, add, gelu, then one softmax.
    assert_eq!(g.op_count(), 4);
    let names: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
    assert_eq!(names[6..], ["softmax"]);
}

#[test]
fn every_builder_method_gives_a_valid_graph_that_round_trips() {
    let g = every_method();
    g.validate().unwrap_or_else(|e| panic!("{e}\n{g}"));
    assert_eq!(Graph::from_json(&g.to_json()).unwrap(), g);
    // The mean over the run-time axis T is one node, the compiled path's mean.
    let mean = IrOp::Composite(Composite::Mean {
        axis: 1,
        keepdim: false,
    });
    assert!(g.nodes.iter().any(|n| n.op == mean));
    let find = |name: &str| g.nodes.iter().find(|n| n.op.name() == name).unwrap();
    assert_eq!(
        find("narrow").shape,
        [Dim::Static(2), sym("B"), Dim::Static(3)]
    );
    assert_eq!(find("argmax").shape, [sym("B")]);
    assert_eq!(find("argmax").dtype, DType::I64);
    assert_eq!(find("abs").shape, [sym("?")]);
    assert_eq!(find("cast").dtype, DType::F16);
    assert_eq!(
        g.nodes[*g.outputs.last().unwrap()].shape,
        [sym("B"), sym("T"), Dim::Static(5)]
    );
}

#[test]
fn layer_norm_is_one_composite_node() {
    let mut b = Builder::new("Ln");
    let x = b.input::<(Dyn<'B'>, Const<4>), f64>("x");
    let y = b.layer_norm(x, None, None, 1e-5);
    b.output(y);
    let g = b.finish();
    let ops: Vec<&str> = g
        .nodes
        .iter()
        .filter(|n| n.op.is_primitive())
        .map(|n| n.op.name())
        .collect();
    assert_eq!(ops, ["layer_norm"]);
    let ln = IrOp::Composite(Composite::LayerNorm { eps: 1e-5 });
    assert_eq!(g.nodes[y.id()].op, ln);
    // Its eps survives the file exactly, and a version 1 file cannot hold it.
    let json = g.to_json();
    assert!(
        json.contains(r#""op": "layer_norm", "eps": 0.00001"#),
        "{json}"
    );
    assert_eq!(Graph::from_json(&json).unwrap(), g);
    let v1 = json.replace(r#""version": 3"#, r#""version": 1"#);
    let err = Graph::from_json(&v1).unwrap_err().to_string();
    assert!(
        err.contains("composite ops such as layer_norm came with version 2"),
        "{err}"
    );
}

#[test]
#[should_panic(expected = "argmax gives indices, not values; use Builder::arg_reduce")]
fn reduce_refuses_an_index_reduction() {
    let mut b = Builder::new("M");
    let x = b.input::<(Const<2>, Const<3>), f32>("x");
    b.reduce::<1, _, _>(x, ReduceOp::ArgMax);
}

#[test]
fn op_names_are_unique_and_read_back() {
    let mut seen = std::collections::HashSet::new();
    let ir_only = [
        "input", "param", "constant", "permute", "reshape", "expand", "narrow", "size",
    ];
    for name in ir_only.into_iter().chain(Composite::NAMES) {
        assert!(seen.insert(name));
        assert!(
            op_from_name(name).is_none(),
            "{name} is also a primitive op"
        );
    }
    for op in super::json::all_ops() {
        assert!(seen.insert(op.name()), "{} is named twice", op.name());
        assert_eq!(op_from_name(op.name()), Some(op));
    }
    println!("op names: {}", seen.len());
    // The graph's own 8, the 7 composites, the registry's unary ops, and 34 other primitives.
    assert_eq!(
        seen.len(),
        8 + Composite::NAMES.len() + UnaryOp::ALL.len() + 34
    );
}

#[test]
fn constants_round_trip_bit_for_bit() {
    let mut b = Builder::new("Consts");
    for v in [
        0.1,
        -0.0,
        1e-5,
        784.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        1.0 / 3.0,
    ] {
        b.constant::<f64>(v);
    }
    let g = b.finish();
    let json = g.to_json();
    assert!(json.contains(r#"{"op": "constant", "value": "-inf", "dtype": "f64", "shape": []}"#));
    assert!(json.contains(r#""value": -0.0,"#));
    assert_eq!(Graph::from_json(&json).unwrap(), g);
}

/// A small valid file to break in the loader tests.
fn text() -> String {
    let mut b = Builder::new("M");
    let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    let w = b.scope("fc", |b| b.param::<(Const<3>, Const<2>), f32>("weight"));
    let y = b.matmul(x, w);
    let s = b.reduce::<1, _, _>(y, ReduceOp::Sum);
    b.output(s);
    b.finish().to_json()
}

fn load_err(text: &str) -> String {
    Graph::from_json(text).unwrap_err().to_string()
}

#[test]
fn the_file_reads_as_documented() {
    assert_eq!(
        text(),
        r#"{
  "format": "rtx-ir",
  "version": 3,
  "name": "M",
  "nodes": [
    {"op": "input", "name": "x", "dtype": "f32", "shape": ["B", 3]},
    {"op": "param", "name": "fc.weight", "dtype": "f32", "shape": [3, 2], "scope": "fc"},
    {"op": "matmul", "inputs": [0, 1], "dtype": "f32", "shape": ["B", 2]},
    {"op": "sum", "axis": 1, "inputs": [2], "dtype": "f32", "shape": ["B"]}
  ],
  "outputs": [3]
}
"#
    );
}

#[test]
fn the_loader_names_the_node_and_the_problem() {
    let t = text();
    let cases = [
        (
            t.replace(r#""version": 3"#, r#""version": 4"#),
            "version 4 is newer than this rtx reads (versions 1 to 3); a newer rtx wrote it",
        ),
        (
            t.replace(r#""version": 3"#, r#""version": 2"#)
                .replace(r#""op": "sum", "axis": 1"#, r#""op": "cross_entropy""#),
            "node 3 (cross_entropy): cross_entropy came with version 3; this file says version 2",
        ),
        (
            t.replace(r#""version": 3"#, r#""version": 0"#),
            "version 0 does not exist; versions start at 1",
        ),
        (
            t.replace(r#""rtx-ir""#, r#""onnx""#),
            r#"format is "onnx", not "rtx-ir""#,
        ),
        (
            t.replace(r#""inputs": [0, 1]"#, r#""inputs": [0, 3]"#),
            "node 2 (matmul): reads %3, which is not an earlier node",
        ),
        (
            t.replace(r#""op": "sum""#, r#""op": "summ""#),
            "node 3 (summ): unknown op \"summ\" (not a primitive op of this rtx, nor one of \
             input, param, constant, permute, reshape, expand, narrow, size, softmax, \
             log_softmax, mean, layer_norm, rms_norm, linear, causal_attention, cross_entropy)",
        ),
        (
            t.replace(r#""axis": 1, "#, ""),
            "node 3 (sum): needs an axis",
        ),
        (
            t.replace(r#""axis": 1, "#, r#""axis": 2, "#),
            "node 3 (sum): axis 2 is out of range for [B, 2]",
        ),
        (
            t.replace(r#""op": "matmul", "#, r#""op": "matmul", "axis": 0, "#),
            "node 2 (matmul): takes no axis",
        ),
        (
            t.replace(r#""name": "x", "#, r#""name": "x", "perm": [0], "#),
            "node 0 (input): the field \"perm\" does not apply to input",
        ),
        (
            t.replace(r#""shape": ["B"]"#, r#""shape": ["B"], "colour": 1"#),
            "node 3: unknown field `colour`",
        ),
        (
            t.replace(
                r#""dtype": "f32", "shape": ["B", 3]"#,
                r#""dtype": "float32", "shape": ["B", 3]"#,
            ),
            "node 0 (input): unknown dtype \"float32\" (element types are f32, f64, f16, bf16, \
             i32, i64, u8 and bool)",
        ),
        (
            t.replace(r#""shape": [3, 2]"#, r#""shape": [3, -2]"#),
            "node 1 (param): shape entry 1 is -2: a dim is a size (an integer from 0) or a \
             run-time dim's name (a non-empty string)",
        ),
        (
            t.replace(r#""shape": [3, 2]"#, r#""shape": [4, 2]"#),
            "node 2 (matmul): the inner dims of [B, 3] and [4, 2] differ (3 vs 4)",
        ),
        (
            t.replace(r#""shape": ["B", 2]"#, r#""shape": ["T", 2]"#),
            "node 2 (matmul): shape [T, 2] is not [B, 2], the shape its op gives",
        ),
        (
            t.replace(r#""outputs": [3]"#, r#""outputs": [4]"#),
            "output 0 is node 4, but the graph has 4 nodes",
        ),
        (
            t.replace(r#""name": "fc.weight""#, r#""name": "x""#)
                .replace(r#""op": "param""#, r#""op": "input""#),
            "node 1 (input): the input \"x\" is already node 0",
        ),
        ("[1, 2]".to_string(), "the top level is not a JSON object"),
    ];
    for (text, expected) in cases {
        let err = load_err(&text);
        assert!(
            err.starts_with("IR JSON text: ")
                && err["IR JSON text: ".len()..].starts_with(expected),
            "expected {expected:?}\n     got {err:?}"
        );
    }
    assert!(load_err("{").starts_with("IR JSON text: not valid JSON: EOF while parsing"));
    assert_eq!(VERSION, 3);
}

/// The index of the first node of op `name`.
fn first(g: &Graph, name: &str) -> usize {
    g.nodes.iter().position(|n| n.op.name() == name).unwrap()
}

#[test]
fn validate_checks_shapes_and_types_op_by_op() {
    let base = every_method();
    type Breaks = Box<dyn Fn(&mut Graph)>;
    let cases: Vec<(Breaks, &str)> = vec![
        (
            Box::new(|g| {
                let i = first(g, "sub");
                g.nodes[i].dtype = DType::F64;
            }),
            "its element type is f64, not f32",
        ),
        (
            Box::new(|g| {
                let i = first(g, "permute");
                g.nodes[i].op = IrOp::Permute(vec![0, 0, 1]);
            }),
            "[0, 0, 1] is not a permutation of the 3 axes of [B, 2, 4]",
        ),
        (
            Box::new(|g| {
                let i = first(g, "reshape");
                g.nodes[i].shape = vec![sym("B"), Dim::Static(3), Dim::Static(3)];
            }),
            "(permute): shape [4, B, 2] is not [3, B, 3], the shape its op gives",
        ),
        (
            Box::new(|g| {
                let i = first(g, "narrow");
                g.nodes[i].op = IrOp::Narrow { axis: 2, start: 2 };
            }),
            "range 2..5 is out of bounds for axis 2 of size 4",
        ),
        (
            Box::new(|g| {
                let i = first(g, "where");
                g.nodes[i].inputs.swap(0, 1);
            }),
            "is f32, not bool",
        ),
        (
            Box::new(|g| {
                let i = first(g, "gt");
                g.nodes[i].dtype = DType::F32;
            }),
            "its element type is f32, not bool",
        ),
    ];
    for (k, (break_it, expected)) in cases.into_iter().enumerate() {
        let mut g = base.clone();
        break_it(&mut g);
        let err = g.validate().unwrap_err().to_string();
        assert!(
            err.starts_with("IR graph `Everything`: node "),
            "case {k}: {err}"
        );
        assert!(
            err.contains(expected),
            "case {k}: expected {expected:?}\n got {err:?}"
        );
    }
}

#[test]
fn the_summary_has_a_line_per_node_and_the_totals() {
    let mut b = Builder::new("Tiny");
    let x = b.input::<(Dyn<'B'>, Const<4>), f32>("x");
    let y = b.scope("fc", |b| {
        let w = b.param::<(Const<4>, Const<2>), f32>("weight");
        b.kernel("k", |b| {
            let y = b.matmul(x, w);
            b.binary_scalar(y, 0.5, BinaryOp::Mul, false)
        })
    });
    let s = b.reduce_keepdim::<1, _, _>(y, ReduceOp::Sum);
    b.output(s);
    let text = b.finish().to_string();
    assert_eq!(
        text,
        "graph Tiny
%0 = input x                  : [B, 4] f32
%1 = param fc.weight          : [4, 2] f32   fc
%2 = matmul(%0, %1)           : [B, 2] f32   fc   [kernel k]
%3 = constant 0.5             : [] f32       fc   [kernel k]
%4 = mul(%2, %3)              : [B, 2] f32   fc   [kernel k]
%5 = sum[axis=1, keepdim](%4) : [B, 1] f32
outputs: %5
nodes: 6 (1 input, 1 param, 1 constant, 0 views, 3 primitive ops)
ops: matmul 1, mul 1, sum 1
params: 1 tensor, 8 elements
"
    );
}
