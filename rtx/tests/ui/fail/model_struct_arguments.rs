// #[model] on a struct takes no arguments.
use rtx::prelude::*;

#[model(eager)]
struct Net {
    weight: Tensor<Rank2<3, 2>>,
}

fn main() {}
