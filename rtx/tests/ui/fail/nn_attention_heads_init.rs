// Attention heads built through Init::init_named: 5 heads do not divide 64.
use rtx::prelude::*;

fn main() {
    let _attn = CausalSelfAttention::<64, 5>::init_named(&Device::Cpu, 0, "attn.");
}
