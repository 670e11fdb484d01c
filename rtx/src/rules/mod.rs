//! One gradient rule per op: each op family's backward written once, on storages and
//! layouts, and called by every backward that differentiates the op: the static backward of
//! a compiled model (`compile/`) and the IR's backward (`ir/exec/backward/`). A rule takes
//! what the forward saved and the output's gradient, and returns the inputs' gradients asked
//! for, so two backwards that call it launch the same kernels and get the same bits.
//!
//! Where each family's rule lives:
//! - products and `Linear` (with its bias): `tensor::matmul_layouts_grads`, the layout-level
//!   form of `MatmulGrad`, whose computation (`GradPlan`) both share;
//! - layer and RMS norm: [`norm`]; softmax and log-softmax: [`softmax`]; the reductions:
//!   [`reduce`];
//! - 2-d convolution and pooling: [`conv`]; `index_select` (embeddings) and `gather`:
//!   [`index`];
//! - `narrow` and the joins (concatenation, stacking): [`views`]; the fused cross entropy:
//!   [`loss`] (the other losses are compositions, differentiated through their parts' rules);
//! - causal attention: `compile::layers::attention::attend`, which returns its backward;
//! - elementwise chains: the derivative kernels `#[kernel]` derives (the fused chain's in the
//!   static backward; in the IR, the same forward-mode rules applied node by node, with each
//!   unary op's own derived kernel: `ir/exec/backward/chain.rs`).
//!
//! Invariant: a rule depends only on its arguments' values and layouts, never on shape types,
//! so the typed static path and the IR's run-time shapes reach the same code.

pub(crate) mod conv;
pub(crate) mod index;
pub(crate) mod loss;
pub(crate) mod norm;
pub(crate) mod reduce;
pub(crate) mod softmax;
pub(crate) mod views;

use rtx_backends::{Layout, Storage};
use std::sync::Arc;

/// A tensor as a rule reads it: its storage and the layout it is seen through.
pub(crate) type Operand<'a, E> = (&'a Storage<E>, &'a Layout);

/// A tensor as a rule reads it when its gradient may be a view of it (a reduction's spread
/// gradient shares the output gradient's storage, as the tape's does): the shared storage and
/// its layout.
pub(crate) type Shared<'a, E> = (&'a Arc<Storage<E>>, &'a Layout);

/// A gradient as such a rule returns it: a storage, fresh or shared with an operand, and the
/// layout to read it through (at the input's dims).
pub(crate) type Grad<E> = (Arc<Storage<E>>, Layout);
