// Only `let` statements and a tail expression: a bare statement is outside the subset.
use rtx::prelude::*;

#[model]
struct Net {
    fc: Linear<3, 2>,
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        println!("running");
        self.fc.forward(x)
    }
}

fn main() {}
