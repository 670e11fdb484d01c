//! The tiny linear model y = x w + b (3 inputs, 2 outputs, f64) that the optimizer tests and
//! the third-backend test train: its parameters and how a `Module` visits them.

use rtx::nn::{Module, Visitor, VisitorMut, join};
use rtx::prelude::*;

/// y = x @ w + b.
pub struct Lin {
    /// The weight, `[3, 2]`.
    pub w: Tensor<Rank2<3, 2>, f64>,
    /// The bias, `[2]`.
    pub b: Tensor<Rank1<2>, f64>,
}

impl Module for Lin {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        self.w.visit(&join(prefix, "w."), v);
        self.b.visit(&join(prefix, "b."), v);
    }
    fn visit_mut<V: VisitorMut>(&mut self, prefix: &str, v: &mut V) {
        self.w.visit_mut(&join(prefix, "w."), v);
        self.b.visit_mut(&join(prefix, "b."), v);
    }
}
