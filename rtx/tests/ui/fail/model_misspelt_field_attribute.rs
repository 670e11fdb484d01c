// A misspelt field attribute is reported by rustc at its own span.
use rtx::prelude::*;

#[model]
struct Net {
    #[bufer]
    running_mean: Tensor<Rank1<3>>,
}

fn main() {}
