// A compiled forward that feeds a layer the wrong width: one error, at the user's call, as
// the same mistake in an eager forward gives (the compiled forward adds none of its own).
use rtx::prelude::*;

#[model]
struct Net {
    fc1: Linear<3, 4>,
    fc2: Linear<5, 2>,
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<(Dyn<'B'>, Const<3>)>) -> Tensor<(Dyn<'B'>, Const<2>)> {
        let h = self.fc1.forward(x).relu();
        self.fc2.forward(&h)
    }
}

fn main() {}
