// Field attributes take no arguments, and a field is either a buffer or skipped.
use rtx::prelude::*;

#[model]
struct Net {
    #[skip(always)]
    p: f64,
    #[buffer]
    #[skip]
    q: Tensor<Rank1<3>>,
}

fn main() {}
