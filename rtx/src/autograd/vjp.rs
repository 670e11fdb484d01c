//! A few recorded ops differentiated on their own, for a caller that keeps its gradients
//! itself: the static backward of a compiled model (`crate::compile::grad`). The caller makes
//! its inputs fresh leaves ([`Tensor::fresh_leaf`]), runs a tensor method with recording on
//! ([`super::recording`]), and keeps the output's node in a [`Recorded`]; later,
//! [`Recorded::pull`] runs the rules the op recorded on a given output gradient. So the static
//! backward applies each op's own tape rule, and no op's gradient is written twice.
//!
//! Invariant: the walk is the tape's (same order, same additions), restricted to the nodes
//! from which a leaf whose gradient is asked for can be reached; each rule is told which of
//! its inputs those are, so nothing is computed that nobody asked for.

use super::{Erased, Node, inputs_first, no_grad};
use crate::error::Result;
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Element;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What a recorded op leaves for its backward: the output's node and its inputs' leaves.
pub(crate) struct Recorded {
    /// The output's node: the op's (or, for an op that returned its input, the leaf itself);
    /// `None` when nothing recorded (no input takes gradients, or the op passes none, as a
    /// cast to integers).
    root: Option<Arc<Node>>,
    /// Each input's leaf id, in the caller's order; `None` for an input without a node.
    leaves: Vec<Option<u64>>,
}

impl Recorded {
    /// The record of an op whose output is `out` and whose inputs were the leaves `inputs`
    /// (as [`Tensor::fresh_leaf`] made them).
    pub(crate) fn new<T: Shape, U: Element>(
        out: &Tensor<T, U>,
        inputs: &[Option<&Arc<Node>>],
    ) -> Recorded {
        Recorded {
            root: out.node().cloned(),
            leaves: inputs.iter().map(|n| n.map(|n| n.id)).collect(),
        }
    }

    /// The gradients of the inputs for the output's gradient `seed` (of the output's own
    /// tensor type): one per input, `Some` where `need` asks for it and the input takes
    /// gradients. Rules run without recording, as on the tape.
    pub(crate) fn pull(&self, seed: Erased, need: &[bool]) -> Result<Vec<Option<Erased>>> {
        let mut out: Vec<Option<Erased>> = vec![None; self.leaves.len()];
        let Some(root) = &self.root else {
            return Ok(out);
        };
        let asked: Vec<u64> = self
            .leaves
            .iter()
            .zip(need)
            .filter_map(|(leaf, &n)| leaf.filter(|_| n))
            .collect();
        if asked.is_empty() {
            return Ok(out);
        }
        let order = inputs_first(root);
        // The nodes that lead to an asked-for leaf: inputs come first in `order`, so one pass.
        let mut wanted: HashSet<u64> = HashSet::new();
        for node in &order {
            if asked.contains(&node.id)
                || node.inputs.iter().flatten().any(|i| wanted.contains(&i.id))
            {
                wanted.insert(node.id);
            }
        }
        let mut pending: HashMap<u64, Erased> = HashMap::new();
        pending.insert(root.id, seed);
        no_grad(|| -> Result<()> {
            for node in order.iter().rev() {
                if !wanted.contains(&node.id) {
                    continue;
                }
                let Some(g) = pending.remove(&node.id) else {
                    continue;
                };
                let Some(rule) = &node.backward else {
                    if let Some(k) = self.leaves.iter().position(|l| *l == Some(node.id)) {
                        out[k] = Some(g);
                    }
                    continue;
                };
                let mask: Vec<bool> = node
                    .inputs
                    .iter()
                    .map(|i| i.as_ref().is_some_and(|i| wanted.contains(&i.id)))
                    .collect();
                for ((input, grad), &m) in node.inputs.iter().zip(rule(&g, &mask)?).zip(&mask) {
                    let (Some(input), Some(grad), true) = (input, grad, m) else {
                        continue;
                    };
                    let merged = match pending.remove(&input.id) {
                        Some(prev) => (input.accumulate)(&prev, &grad)?,
                        None => grad,
                    };
                    pending.insert(input.id, merged);
                }
            }
            Ok(())
        })?;
        Ok(out)
    }
}
