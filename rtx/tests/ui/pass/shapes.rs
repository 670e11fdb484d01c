// Correct uses of every rule the fail cases break, built (not only checked).
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Const<3>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let b: Tensor<Rank1<3>> = Tensor::ones((Const,), Device::Cpu);
    let y = (&x + &b).relu();
    let col: Tensor<Rank2<2, 1>> = Tensor::zeros((Const, Const), Device::Cpu);
    let z: Tensor<Rank2<2, 3>> = col.broadcast_to((Const, Const));
    let r: Tensor<Rank3<3, 2, 1>> = z.reshape((Const, Const, Const));
    let f: Tensor<Rank2<3, 2>> = r.flatten::<1, 2, _>();
    let p = r.permute::<Axes3<2, 0, 1>>();
    let lit: Tensor<Rank2<2, 2>, i32> = Tensor::from_array([[1, 2], [3, 4]], Device::Cpu);
    println!("{:?} {:?} {:?} {:?}", y.dims(), f.dims(), p.dims(), lit.cast::<f64>().dims());
}
