// Attention heads inside a `#[model]` struct: 3 heads do not divide 64, named at the field.
use rtx::prelude::*;

#[model]
struct Block {
    attn: CausalSelfAttention<64, 3>,
    norm: LayerNorm<64>,
}

fn main() {
    let _block = Block::init_named(&Device::Cpu, 0, "");
}
