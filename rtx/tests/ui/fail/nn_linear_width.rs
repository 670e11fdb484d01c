// A Linear<784, 128> applied to 512 features: the inner dims of its matmul differ.
use rtx::prelude::*;

fn main() {
    let fc = Linear::<784, 128>::new(Device::Cpu, 0);
    let x: Tensor<(Dyn<'B'>, Const<512>)> = Tensor::zeros((Dyn(4), Const), Device::Cpu);
    let _ = fc.forward(&x);
}
