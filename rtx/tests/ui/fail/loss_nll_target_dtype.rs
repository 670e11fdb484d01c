// nll_loss takes class indices as i64, not f32.
use rtx::prelude::*;

fn main() {
    let logp: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let targets: Tensor<Rank1<2>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = nll_loss(&logp, &targets);
}
