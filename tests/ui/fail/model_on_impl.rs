// Compiling the forward pass from an impl block is not implemented yet.
use rtx::prelude::*;

#[model]
struct Net {
    weight: Tensor<Rank2<3, 2>>,
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        x.matmul(&self.weight)
    }
}

fn main() {}
