// Every tensor in a compiled forward is an argument or an earlier `let`.
use rtx::prelude::*;

#[model]
struct Net {
    fc: Linear<3, 2>,
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        let h = self.fc.forward(x);
        h + bias
    }
}

fn main() {}
