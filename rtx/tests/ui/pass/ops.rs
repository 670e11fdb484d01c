// Correct uses of the op families whose misuse the fail cases show, built (not only checked).
use rtx::prelude::*;

fn main() {
    let x: Tensor<(Dyn<'B'>, Const<784>)> = Tensor::zeros((Dyn(2), Const), Device::Cpu);
    let w: Tensor<Rank2<784, 10>> = Tensor::zeros((Const, Const), Device::Cpu);
    let p = x.matmul(&w).softmax::<1>();
    let s = p.sum::<1>();
    let img: Tensor<Rank4<8, 1, 28, 28>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let k: Tensor<Rank4<6, 1, 5, 5>> = Tensor::zeros((Const, Const, Const, Const), Device::Cpu);
    let c: Tensor<Rank4<8, 6, 24, 24>> = img.conv2d(&k, Conv::<1>);
    let m: Tensor<Rank4<8, 6, 12, 12>> = c.max_pool2d(Pool::<2, 2>);
    let a: Tensor<Rank2<2, 3>> = Tensor::zeros((Const, Const), Device::Cpu);
    let b: Tensor<Rank2<2, 4>> = Tensor::zeros((Const, Const), Device::Cpu);
    let j: Tensor<Rank2<2, 7>> = a.concat::<1, _>(&b);
    let st = Tensor::stack::<0, 2>([&a, &a]);
    println!("{:?} {:?} {:?} {:?}", s.dims(), m.dims(), j.dims(), st.dims());
}
