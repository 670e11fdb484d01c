// A user's generic function that reshapes: the error names the reshape in that function.
use rtx::prelude::*;

fn pairs<const N: usize>(x: &Tensor<Rank1<N>>) -> Tensor<Rank2<2, 4>> {
    x.reshape((Const, Const))
}

fn main() {
    let x: Tensor<Rank1<6>> = Tensor::zeros((Const,), Device::Cpu);
    let _ = pairs(&x);
}
