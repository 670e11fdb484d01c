//! Printing matches PyTorch: the same tensors printed by rtx and by PyTorch
//! (tests/fixtures/display_torch.txt, written by tests/fixtures/display_torch.py).

use rtx::prelude::*;

#[test]
fn display_matches_pytorch() {
    let cpu = Device::Cpu;
    let nan = f32::NAN;
    let cases: Vec<String> = vec![
        Tensor::<Rank2<2, 3>>::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], cpu).to_string(),
        Tensor::<Rank2<2, 2>>::from_array([[0.12345, -2.5], [100.0, 3.0]], cpu).to_string(),
        Tensor::<Rank1<3>, i32>::from_array([1, -2, 3], cpu).to_string(),
        Tensor::<Rank1<3>, f64>::from_array([1e-5, 1.0, 1e6], cpu).to_string(),
        Tensor::<Rank1<2>, bool>::from_array([true, false], cpu).to_string(),
        Tensor::<(usize,)>::arange(2000, cpu)
            .reshape((40usize, 50usize))
            .to_string(),
        Tensor::<Rank0>::from_array(3.5, cpu).to_string(),
        Tensor::<(usize,), i64>::arange(24, cpu)
            .reshape((2usize, 3usize, 4usize))
            .to_string(),
        Tensor::<Rank1<3>>::from_array([nan, f32::INFINITY, -1.5], cpu).to_string(),
        Tensor::<Rank1<2>, f16>::from_array([f16::from_f32(0.5), f16::from_f32(0.25)], cpu)
            .to_string(),
        Tensor::<Rank2<1, 2>, bf16>::from_array([[bf16::ONE, -bf16::ONE]], cpu).to_string(),
        Tensor::<(usize, usize)>::zeros((0, 3), cpu).to_string(),
        Tensor::<Rank1<2>>::from_array([123456789.0, 1.0], cpu).to_string(),
    ];
    let ours = cases.join("\n") + "\n";
    let torch = include_str!("../fixtures/display_torch.txt");
    for (i, (a, b)) in ours
        .split("\ntensor")
        .zip(torch.split("\ntensor"))
        .enumerate()
    {
        assert_eq!(a, b, "case {i} prints differently from PyTorch");
    }
    assert_eq!(ours, torch);
}
