// A data-set item of rank 6 has no room for the batch dim the loader puts in front.
use rtx::prelude::*;

fn main() {
    let item: Tensor<Rank6<1, 1, 1, 1, 1, 2>> =
        Tensor::zeros((Const, Const, Const, Const, Const, Const), Device::Cpu);
    let _ = Collate::collate(vec![item], Const::<1>, Device::Cpu);
}
