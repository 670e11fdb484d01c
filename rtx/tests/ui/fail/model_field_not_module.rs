// A hyperparameter field that is neither a tensor nor a layer must be marked #[skip].
use rtx::prelude::*;

#[model]
struct Net {
    weight: Tensor<Rank2<3, 2>>,
    dropout: f64,
}

fn main() {}
