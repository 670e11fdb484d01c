// A one-input elementwise kernel applied to two tensors: the arity is part of the marker's
// type, so this does not compile.
use rtx::prelude::*;

#[rtx::kernel(elementwise)]
fn double<T: Float>(x: T) -> T {
    x + x
}

fn main() {
    let a: Tensor<Rank1<3>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = rtx::kernel::map2(double::Op, &a, &a, &[]);
}
