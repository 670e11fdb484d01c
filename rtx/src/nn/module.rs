//! The `Module` trait: a model's tensors, reached by name. `#[model]` implements it for a
//! struct by visiting each field; layers in `nn` implement it by hand. Everything else a model
//! can do (counting, freezing, moving, saving, optimizer steps) is written once against it.

use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_kernels::Float;

/// What a visited tensor is to its model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Trained by the optimizer (PyTorch's `nn.Parameter`).
    Parameter,
    /// Saved with the model but not trained (running statistics of batch norm).
    Buffer,
}

/// Receives a model's tensors, read-only, with their dotted PyTorch-style names
/// (`layers.2.weight`).
pub trait Visitor {
    /// Called once per tensor.
    fn visit<S: Shape, E: Float>(&mut self, name: &str, tensor: &Tensor<S, E>, kind: TensorKind);

    /// Called when the traversal enters a composite module (a `#[model]` struct, an array or a
    /// `Vec` of modules) whose tensors are named `prefix` + their path; `type_name` is
    /// [`std::any::type_name`] of the module. Used for tree-shaped output such as summaries;
    /// hand-written layers may skip it, and their tensors then appear under their parent.
    fn enter(&mut self, _prefix: &str, _type_name: &'static str) {}
    /// Called when the traversal leaves the module entered with the same `prefix`.
    fn leave(&mut self, _prefix: &str) {}
}

/// Receives a model's tensors mutably, with their dotted names.
pub trait VisitorMut {
    /// Called once per tensor; may replace it with a tensor of the same shape type.
    fn visit_mut<S: Shape, E: Float>(
        &mut self,
        name: &str,
        tensor: &mut Tensor<S, E>,
        kind: TensorKind,
    );
}

/// A model or layer: a tree of named tensors.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a model, layer or tensor",
    label = "not a model, layer or tensor",
    note = "mark the field `#[skip]` if it is not part of the model, or make its type a \
            `#[model]` struct"
)]
pub trait Module {
    /// Visits every tensor, naming each `prefix` + its path (`prefix` is empty at the root,
    /// else ends in `.`).
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V);
    /// Visits every tensor mutably, as [`Module::visit`] names them.
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V);
    /// Switches training behaviour (dropout, batch norm) on or off; layers without any keep
    /// the default, which does nothing.
    fn set_training(&mut self, _training: bool) {}

    /// The names of all parameters and buffers, in visiting order.
    fn tensor_names(&self) -> Vec<(String, TensorKind)> {
        struct Names(Vec<(String, TensorKind)>);
        impl Visitor for Names {
            fn visit<S: Shape, E: Float>(
                &mut self,
                name: &str,
                _: &Tensor<S, E>,
                kind: TensorKind,
            ) {
                self.0.push((name.to_string(), kind));
            }
        }
        let mut n = Names(Vec::new());
        self.visit("", &mut n);
        n.0
    }

    /// The number of trainable parameter elements.
    fn num_parameters(&self) -> usize {
        struct Count(usize);
        impl Visitor for Count {
            fn visit<S: Shape, E: Float>(&mut self, _: &str, t: &Tensor<S, E>, kind: TensorKind) {
                if kind == TensorKind::Parameter {
                    self.0 += t.numel();
                }
            }
        }
        let mut c = Count(0);
        self.visit("", &mut c);
        c.0
    }

    /// Marks every parameter as a leaf that records gradients. Call it once, before training
    /// (or let the optimizer do it when it is created); it unfreezes every parameter, so
    /// call it before freezing parts (see `ModelExt::freeze`), not on every step.
    fn track_gradients(&mut self) {
        struct Track;
        impl VisitorMut for Track {
            fn visit_mut<S: Shape, E: Float>(
                &mut self,
                _: &str,
                t: &mut Tensor<S, E>,
                kind: TensorKind,
            ) {
                if kind == TensorKind::Parameter && !t.tracks_grad() {
                    *t = t.detach().requires_grad();
                }
            }
        }
        self.visit_mut("", &mut Track);
    }
}

/// Joins a prefix and a field name: `join("layers.2.", "weight")` is `layers.2.weight`.
pub fn join(prefix: &str, name: &str) -> String {
    format!("{prefix}{name}")
}

impl<S: Shape, E: Float> Module for Tensor<S, E> {
    /// A bare tensor field is a parameter named by its field.
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.visit(prefix.trim_end_matches('.'), self, TensorKind::Parameter);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        v.visit_mut(prefix.trim_end_matches('.'), self, TensorKind::Parameter);
    }
}

impl<M: Module, const N: usize> Module for [M; N] {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        for (i, m) in self.iter().enumerate() {
            m.visit(&format!("{prefix}{i}."), v);
        }
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_mut(&format!("{prefix}{i}."), v);
        }
    }
    fn set_training(&mut self, training: bool) {
        self.iter_mut().for_each(|m| m.set_training(training));
    }
}

impl<M: Module> Module for Vec<M> {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        for (i, m) in self.iter().enumerate() {
            m.visit(&format!("{prefix}{i}."), v);
        }
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_mut(&format!("{prefix}{i}."), v);
        }
    }
    fn set_training(&mut self, training: bool) {
        self.iter_mut().for_each(|m| m.set_training(training));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prelude::*;

    struct Layer {
        weight: Tensor<Rank2<3, 2>>,
        bias: Tensor<Rank1<3>>,
    }

    impl Module for Layer {
        fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
            self.weight.visit(&join(prefix, "weight."), v);
            self.bias.visit(&join(prefix, "bias."), v);
        }
        fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
            self.weight.visit_mut(&join(prefix, "weight."), v);
            self.bias.visit_mut(&join(prefix, "bias."), v);
        }
    }

    #[test]
    fn names_are_dotted_like_pytorch() {
        let layer = || Layer {
            weight: Tensor::zeros((Const, Const), Device::Cpu),
            bias: Tensor::zeros((Const,), Device::Cpu),
        };
        let mut layers = vec![layer(), layer()];
        let names: Vec<String> = layers.tensor_names().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["0.weight", "0.bias", "1.weight", "1.bias"]);
        assert_eq!(layers.num_parameters(), 18);
        layers.track_gradients();
        assert!(layers[1].bias.tracks_grad());
    }
}
