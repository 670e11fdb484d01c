// A LayerNorm<64> over rows of 32 features.
use rtx::prelude::*;

fn main() {
    let ln = LayerNorm::<64>::new(Device::Cpu);
    let x: Tensor<(Dyn<'B'>, Const<32>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let _ = ln.forward(&x);
}
