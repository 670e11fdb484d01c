// A Linear<4, 8> gives 8 features; the result type says 16.
use rtx::prelude::*;

fn main() {
    let fc = Linear::<4, 8>::new(Device::Cpu, 0);
    let x: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _y: Tensor<Rank2<2, 16>> = fc.forward(&x);
}
