// stack needs at least one tensor.
use rtx::prelude::*;

fn main() {
    let _s = Tensor::<Rank1<2>>::stack::<0, 0>([]);
}
