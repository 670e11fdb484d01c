// `#[model]` builds every field with `Init`; a `Vec` has no length to build from, so the
// error at the field says to give it `#[init(..)]`.
use rtx::prelude::*;

#[model]
struct Net {
    layers: Vec<Linear<4, 4>>,
    head: Linear<4, 2>,
}

fn main() {
    let _ = Net::init(&Device::Cpu, 0);
}
