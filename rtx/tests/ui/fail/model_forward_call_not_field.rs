// Sub-models are called through the model's own fields.
use rtx::prelude::*;

#[model]
struct Net {
    fc: Linear<3, 2>,
}

fn layer() -> Linear<3, 2> {
    Linear::new(Device::Cpu, 0)
}

#[model]
impl Net {
    fn forward(&self, x: &Tensor<Rank2<4, 3>>) -> Tensor<Rank2<4, 2>> {
        layer().forward(x)
    }
}

fn main() {}
