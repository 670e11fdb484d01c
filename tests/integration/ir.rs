//! The IR of a small MLP, built as `#[model]`'s generated code builds it: through the typed
//! builder, with real layers' `emit_ir`. Its serialized form and its summary are compared
//! byte for byte with the checked-in goldens in `tests/fixtures/ir/`; after an intended
//! change, regenerate them with `RTX_BLESS=1 cargo test --test integration ir::` and review the diff.

use rtx::compile::StaticForward;
use rtx::ir::{Builder, Dim, Graph};
use rtx::op::UnaryOp;
use rtx::prelude::*;
use std::path::{Path, PathBuf};

/// A two-layer classifier, as a `#[model]` struct would hold it.
struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 10>,
}

// ANCHOR: build
/// The forward `fc1 -> gelu -> fc2 -> softmax` as a graph: each sub-model under its field's
/// scope, the elementwise tails in fused kernels.
fn mlp_graph(m: &Mlp) -> Graph {
    let mut b = Builder::new("Mlp");
    let x = b.input::<(Dyn<'B'>, Const<784>), f32>("x");
    let h = b.scope("fc1", |b| m.fc1.emit_ir(b, (x,)));
    let h = b.kernel("fused_gelu", |b| b.unary(h, UnaryOp::Gelu));
    let logits = b.scope("fc2", |b| m.fc2.emit_ir(b, (h,)));
    let p = b.kernel("softmax_rows", |b| b.softmax::<1, _, _>(logits));
    b.output(p);
    b.finish()
}
// ANCHOR_END: build

fn mlp() -> Mlp {
    Mlp {
        fc1: Linear::new(Device::Cpu, 0),
        fc2: Linear::new(Device::Cpu, 1),
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ir")
        .join(name)
}

/// Compares `actual` with the golden file `name`, or writes it under `RTX_BLESS=1`.
fn golden(name: &str, actual: &str) {
    let path = fixture(name);
    if std::env::var("RTX_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {}: {e} (RTX_BLESS=1 writes it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs (rerun with RTX_BLESS=1 if intended):\n--- expected\n{expected}\n--- actual\n{actual}",
        path.display()
    );
}

#[test]
fn the_mlp_graph_has_the_typed_shapes() {
    let g = mlp_graph(&mlp());
    g.validate().unwrap();
    let b = || Dim::Sym("B".into());
    let shape_of = |op: &str| -> Vec<Vec<Dim>> {
        g.nodes
            .iter()
            .filter(|n| n.op.name() == op)
            .map(|n| n.shape.clone())
            .collect()
    };
    assert_eq!(
        shape_of("linear"),
        [vec![b(), Dim::Static(256)], vec![b(), Dim::Static(10)]]
    );
    assert_eq!(shape_of("gelu"), [vec![b(), Dim::Static(256)]]);
    let out = &g.nodes[g.outputs[0]];
    assert_eq!(
        (out.op.name(), &out.shape),
        ("softmax", &vec![b(), Dim::Static(10)])
    );
    assert_eq!(
        g.params(),
        [
            (1, "fc1.weight"),
            (2, "fc1.bias"),
            (5, "fc2.weight"),
            (6, "fc2.bias")
        ]
    );
    // One linear per layer (its bias added by the product), gelu, softmax.
    println!("MLP IR: {} nodes, {} ops", g.nodes.len(), g.op_count());
    assert_eq!(g.op_count(), 2 + 1 + 1);
    let h = g.op_histogram();
    assert_eq!((h["linear"], h["gelu"], h["softmax"]), (2, 1, 1));
    let fused: Vec<&str> = g.nodes.iter().filter_map(|n| n.kernel.as_deref()).collect();
    assert_eq!(fused.iter().filter(|k| **k == "softmax_rows").count(), 1);
}

#[test]
fn the_mlp_graph_matches_its_golden_json_and_reloads_equal() {
    let g = mlp_graph(&mlp());
    let json = g.to_json();
    golden("mlp.json", &json);
    assert_eq!(Graph::from_json(&json).unwrap(), g);
    // The golden itself reloads to the graph the code builds today.
    assert_eq!(Graph::load(fixture("mlp.json")).unwrap(), g);
}

#[test]
fn the_mlp_summary_matches_its_golden() {
    let g = mlp_graph(&mlp());
    golden("mlp.txt", &g.to_string());
    let summary = g.to_string();
    assert!(
        summary
            .lines()
            .any(|l| l == "%3 = linear(%0, %1, %2)  : [B, 256] f32     fc1"),
        "{summary}"
    );
}

#[test]
fn a_saved_graph_loads_back_and_errors_name_the_file() {
    let dir = std::env::temp_dir().join(format!("rtx-ir-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("mlp.json");
    // ANCHOR: save_load
    let g = mlp_graph(&mlp());
    g.save(&path).unwrap(); // atomic: the file is the old graph or the new one, never a part
    assert_eq!(Graph::load(&path).unwrap(), g);

    // A node that reads a later node: the error names the file, the node and the problem.
    let mut broken = g.clone();
    broken.nodes[3].inputs[0] = 9;
    std::fs::write(&path, broken.to_json()).unwrap();
    let err = Graph::load(&path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "IR file {}: node 3 (linear): reads %9, which is not an earlier node",
            path.display()
        )
    );
    // ANCHOR_END: save_load
    let missing = dir.join("none.json");
    let err = Graph::load(&missing).unwrap_err().to_string();
    assert!(
        err.contains("none.json") && err.contains("cannot read"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_dot_export_groups_each_fused_kernel() {
    let dot = mlp_graph(&mlp()).to_dot();
    for needle in [
        "subgraph \"cluster_fused_gelu\" {",
        "subgraph \"cluster_softmax_rows\" {",
        "n0 [label=\"%0 input x\\n[B, 784] f32\", shape=invhouse",
        "n1 [label=\"%1 param fc1.weight\\n[256, 784] f32\", shape=box, style=\"filled,rounded\"",
        "n0 -> n3;",
        "n8 -> out0;",
    ] {
        assert!(dot.contains(needle), "missing {needle:?} in:\n{dot}");
    }
    // Each cluster holds its kernel's own nodes and nothing else.
    for (kernel, nodes) in [("fused_gelu", 1), ("softmax_rows", 1)] {
        let header = format!("subgraph \"cluster_{kernel}\" {{");
        let cluster = dot.split(&header).nth(1).unwrap();
        let cluster = cluster.split("  }").next().unwrap();
        assert_eq!(cluster.matches(" [label=").count(), nodes, "{cluster}");
    }
}

#[test]
fn a_linear_without_bias_emits_no_add() {
    let mut fc = Linear::<4, 3>::new(Device::Cpu, 0);
    fc.bias = None;
    let mut b = Builder::new("NoBias");
    let x = b.input::<(Dyn<'B'>, Const<4>), f32>("x");
    let y = b.scope("fc", |b| fc.emit_ir(b, (x,)));
    b.output(y);
    let g = b.finish();
    assert_eq!(
        g.op_histogram().into_iter().collect::<Vec<_>>(),
        [("linear", 1)]
    );
    assert_eq!(
        g.nodes[2].inputs,
        [0, 1],
        "the input and the weight, no bias"
    );
}
