// Causal self-attention splits d_model into heads: 3 heads do not divide 64.
use rtx::prelude::*;

fn main() {
    let _attn: CausalSelfAttention<64, 3> = CausalSelfAttention::new(Device::Cpu, 0);
}
