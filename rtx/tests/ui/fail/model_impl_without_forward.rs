// `#[model]` on an impl compiles its `forward`; an impl without one is an error.
use rtx::prelude::*;

#[model]
struct Net {
    fc: Linear<3, 2>,
}

#[model]
impl Net {
    fn predict(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        self.fc.forward(x)
    }
}

fn main() {}
