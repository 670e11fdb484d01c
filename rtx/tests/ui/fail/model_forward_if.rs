// A forward compiled by `#[model]` is straight-line: a branch is outside the subset.
use rtx::prelude::*;

#[model]
struct Net {
    fc: Linear<3, 2>,
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        let h = if true { self.fc.forward(x) } else { self.fc.forward(x) };
        h.relu()
    }
}

fn main() {}
