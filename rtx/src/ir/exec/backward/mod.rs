//! The IR's backward: [`Graph::backward`] runs the graph forward, then walks it in reverse,
//! each node through its op's one gradient rule (`crate::rules`, shared with the static
//! backward of a compiled model), so every gradient is bitwise the static backward's on the
//! same device.
//!
//! A fused chain (the nodes of one [`Node::kernel`] group) is differentiated whole, as its
//! derivative kernels differentiate it (see [`chain`]). A `linear` node whose bias the chain
//! after it adds (a deferred call, see `StaticForward::forward_train_deferred`) takes that
//! bias's gradient itself, from its product's gradient, as the compiled `Linear` does.
//!
//! Invariant: gradients flow only to nodes that need one (float parameters and inputs, and
//! every node that reads one), and each node's gradient is complete before its rule runs:
//! the nodes read only earlier nodes, so the reverse order finishes every reader first.

mod chain;
mod ops;

use super::composite::Saved;
use super::value::{DynTensor, Params};
use super::{Run, exec_error};
use crate::error::Result;
use crate::ir::{Composite, Graph, IrOp, NodeId};
use rtx_kernels::op::{BinaryOp, Op};
use std::collections::BTreeMap;

/// What [`Graph::backward`] returns: the outputs, and the gradients of the parameters and
/// of the float inputs, by name.
#[derive(Clone, Debug)]
pub struct Backward {
    /// The graph's outputs, as [`Graph::run`] returns them.
    pub outputs: Vec<DynTensor>,
    /// Each float parameter's gradient by its dotted name (a parameter no output depends on
    /// is left out).
    pub params: Params,
    /// Each float input's gradient by its name (likewise).
    pub inputs: Params,
}

impl Graph {
    /// Runs the graph forward and back: `seeds` holds the gradient of each output (the same
    /// dims and element type; for a scalar loss, a one), and the result holds the outputs
    /// and the gradients of every float parameter and input they depend on.
    ///
    /// Each node's gradient comes from its op's one rule, the function the compiled model's
    /// static backward calls for the op (the product's `GradPlan`, the fused norm's and
    /// attention's backwards, the derivative kernels of a chain), so on the same device the
    /// gradients are bitwise the static backward's.
    ///
    /// An error names the node and its op: an op the backward does not differentiate, or a
    /// seed that does not fit its output.
    ///
    /// ```
    /// use rtx::ir::{Builder, DynTensor, Params};
    /// use rtx::prelude::*;
    /// let mut b = Builder::new("Head");
    /// let x = b.input::<(Dyn<'B'>, Const<3>), f32>("x");
    /// let w = b.param::<(Const<2>, Const<3>), f32>("weight");
    /// let y = b.linear::<(Dyn<'B'>, Const<2>), _, _, _>(x, w, None);
    /// b.output(y);
    /// let g = b.finish();
    ///
    /// let w = Tensor::<Rank2<2, 3>>::ones((Const, Const), Device::Cpu);
    /// let mut params = Params::new();
    /// params.insert("weight", DynTensor::of(&w));
    /// let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::ones((Dyn(4), Const), Device::Cpu);
    /// let seed: Tensor<(Dyn<'B'>, Const<2>)> = Tensor::ones((Dyn(4), Const), Device::Cpu);
    /// let back = g.backward(&[("x", DynTensor::of(&x))], &params, &[DynTensor::of(&seed)])?;
    /// // dW = seedᵀ x: every entry sums four ones.
    /// assert_eq!(back.params.get("weight").unwrap().to_f64_vec(), vec![4.0; 6]);
    /// assert_eq!(back.inputs.get("x").unwrap().to_f64_vec(), vec![2.0; 12]);
    /// # Ok::<(), rtx::Error>(())
    /// ```
    pub fn backward(
        &self,
        inputs: &[(&str, DynTensor)],
        params: &Params,
        seeds: &[DynTensor],
    ) -> Result<Backward> {
        let mut run = self.forward(inputs, params)?;
        let saved = std::mem::take(&mut run.saved);
        let outputs = run.outputs()?;
        if seeds.len() != self.outputs.len() {
            return Err(exec_error(format!(
                "backward of graph `{}` was given {} seeds for its {} outputs",
                self.name,
                seeds.len(),
                self.outputs.len()
            )));
        }
        let mut back = Reverse::new(&run, saved);
        for ((&o, seed), out) in self.outputs.iter().zip(seeds).zip(&outputs) {
            if seed.dims() != out.dims() || seed.dtype() != out.dtype() {
                return Err(run.at(
                    o,
                    exec_error(format!("the seed {seed:?} does not fit the output {out:?}")),
                ));
            }
            back.give(o, seed.clone()).map_err(|e| run.at(o, e))?;
        }
        for i in (0..self.nodes.len()).rev() {
            back.step(i).map_err(|e| run.at(i, e))?;
        }
        let (params, inputs) = back.leaves()?;
        Ok(Backward {
            outputs,
            params,
            inputs,
        })
    }
}

/// The reverse walk over one forward run: each node's gradient so far.
struct Reverse<'r, 'g> {
    run: &'r Run<'g>,
    /// Each node's gradient, in its element type, summed over its readers so far.
    grads: Vec<Option<DynTensor>>,
    /// Whether a node needs a gradient.
    needs: Vec<bool>,
    /// For a node in a fused chain, the chain's nodes (in order); the last is its output.
    chains: Vec<Option<std::rc::Rc<Vec<NodeId>>>>,
    /// For a bias-less `linear` node, the bias its chain adds (a deferred call's bias).
    deferred: BTreeMap<NodeId, NodeId>,
    /// What each composite node's forward kept for its backward, taken when it runs.
    saved: Vec<Saved>,
}

impl<'r, 'g> Reverse<'r, 'g> {
    fn new(run: &'r Run<'g>, saved: Vec<Saved>) -> Self {
        let g = run.graph();
        let mut needs = vec![false; g.nodes.len()];
        for (i, n) in g.nodes.iter().enumerate() {
            needs[i] = match &n.op {
                IrOp::Param(_) | IrOp::Input(_) => n.dtype.is_float(),
                IrOp::Constant(_) => false,
                _ => n.dtype.is_float() && n.inputs.iter().any(|&j| needs[j]),
            };
        }
        Reverse {
            run,
            grads: vec![None; g.nodes.len()],
            needs,
            chains: chain::groups(g),
            deferred: deferred_biases(g),
            saved,
        }
    }

    /// Adds `d` to node `j`'s gradient (the first fills it, as the static backward's slots
    /// fill).
    fn give(&mut self, j: NodeId, d: DynTensor) -> Result<()> {
        if !self.needs[j] {
            return Ok(());
        }
        self.grads[j] = Some(match self.grads[j].take() {
            None => d,
            Some(prev) => {
                let add = Op::Binary(BinaryOp::Add);
                let dtype = prev.dtype();
                super::prim::op_node(add, &Default::default(), &[prev, d], dtype)?
            }
        });
        Ok(())
    }

    /// Runs node `i`'s rule on its gradient, if it has one, giving its inputs theirs.
    fn step(&mut self, i: NodeId) -> Result<()> {
        let graph = self.run.graph();
        let n = &graph.nodes[i];
        if matches!(n.op, IrOp::Param(_) | IrOp::Input(_) | IrOp::Constant(_)) {
            return Ok(());
        }
        if let Some(c) = self.chains[i].clone() {
            // The chain runs whole at its output; its other nodes get no gradient of their own.
            if c.last() != Some(&i) {
                return Ok(());
            }
            let Some(g) = self.grads[i].take() else {
                return Ok(());
            };
            for (j, d) in chain::backward(self, &c, &g)? {
                self.give(j, d)?;
            }
            return Ok(());
        }
        let Some(g) = self.grads[i].take() else {
            return Ok(());
        };
        let saved = self.saved[i].take();
        for (j, d) in ops::backward(self, i, &g, saved)? {
            self.give(j, d)?;
        }
        Ok(())
    }

    /// Whether node `i`'s input `k` needs a gradient.
    fn wants(&self, i: NodeId, k: usize) -> bool {
        let ins = &self.run.graph().nodes[i].inputs;
        ins.get(k).is_some_and(|&j| self.needs[j])
    }

    /// The gradients of the parameters and the inputs, by name (summed where a name recurs).
    fn leaves(mut self) -> Result<(Params, Params)> {
        let (mut params, mut inputs) = (BTreeMap::new(), BTreeMap::new());
        let graph = self.run.graph();
        for (i, n) in graph.nodes.iter().enumerate() {
            let into = match &n.op {
                IrOp::Param(name) => params.entry(name.clone()),
                IrOp::Input(name) => inputs.entry(name.clone()),
                _ => continue,
            };
            let Some(g) = self.grads[i].take() else {
                continue;
            };
            match into {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(g);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    let add = Op::Binary(BinaryOp::Add);
                    let prev = o.get().clone();
                    let dtype = prev.dtype();
                    *o.get_mut() =
                        super::prim::op_node(add, &Default::default(), &[prev, g], dtype)?;
                }
            }
        }
        let collect = |m: BTreeMap<String, DynTensor>| {
            let mut p = Params::new();
            for (k, v) in m {
                p.insert(k, v);
            }
            p
        };
        Ok((collect(params), collect(inputs)))
    }
}

/// The deferred biases: for each bias-less `linear` node whose output the first node of a
/// fused chain adds a vector to (`add(linear, bias)`, what `compile::glue::ir_add_bias`
/// emits), that vector's node.
fn deferred_biases(g: &Graph) -> BTreeMap<NodeId, NodeId> {
    let mut out = BTreeMap::new();
    for n in &g.nodes {
        let (IrOp::Op(Op::Binary(BinaryOp::Add)), Some(_), [a, b]) =
            (&n.op, &n.kernel, n.inputs.as_slice())
        else {
            continue;
        };
        let lin = &g.nodes[*a];
        let bias = &g.nodes[*b];
        if lin.op == IrOp::Composite(Composite::Linear)
            && lin.inputs.len() == 2
            && bias.shape.len() == 1
            && lin.shape.last() == bias.shape.last()
        {
            out.insert(*a, *b);
        }
    }
    out
}
