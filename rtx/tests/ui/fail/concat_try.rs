// try_concat along axis 0: 2 + 3 rows cannot become 4.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank2<3, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _c: Result<Tensor<Rank2<4, 3>>> = a.try_concat::<0, _>(&b);
}
