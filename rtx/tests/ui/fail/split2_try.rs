// try_split2 along axis 0: 4 rows cannot become 1 + 2.
use rtx::prelude::*;

fn main() {
    let a: Tensor<Rank2<4, 2>> = Tensor::zeros((Const, Const), Device::Cpu);
    let _ = a.try_split2::<0, Const<1>, Const<2>>(Const, Const);
}
