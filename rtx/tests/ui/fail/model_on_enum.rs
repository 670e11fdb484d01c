// A model needs named fields: they become the parameter names.
use rtx::prelude::*;

#[model]
enum Net {
    A(Tensor<Rank1<3>>),
}

fn main() {}
