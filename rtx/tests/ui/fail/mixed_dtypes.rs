// f32 and f64 tensors do not mix without an explicit cast.
use rtx::prelude::*;

fn main() {
    let x: Tensor<Rank1<3>, f32> = Tensor::zeros((Const,), Device::Cpu);
    let y: Tensor<Rank1<3>, f64> = Tensor::zeros((Const,), Device::Cpu);
    let _ = x + y;
}
