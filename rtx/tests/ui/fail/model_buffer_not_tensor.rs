// A #[buffer] must be a float tensor.
use rtx::prelude::*;

#[model]
struct Net {
    #[buffer]
    steps: u64,
}

fn main() {}
