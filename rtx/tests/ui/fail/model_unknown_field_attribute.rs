// `#[module]` is not an attribute of #[model]: modules are visited by default.
use rtx::prelude::*;

#[model]
struct Net {
    #[module]
    weight: Tensor<Rank1<3>>,
}

fn main() {}
