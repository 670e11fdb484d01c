// A model needs named fields: they become the parameter names.
use rtx::prelude::*;

#[model]
struct Net(Tensor<Rank1<3>>);

fn main() {}
