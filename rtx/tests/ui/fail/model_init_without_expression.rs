// `#[init]` needs the expression that builds the field.
use rtx::prelude::*;

#[model]
struct Net {
    #[init]
    drop: Dropout,
    head: Linear<4, 2>,
}

fn main() {}
