//! The MLP of the equivalence check (the shape of benches/ddp_step's: two hidden GELU layers,
//! cross-entropy over 10 classes, Adam at 1e-3 or SGD, f32, the compiled step) on a fixed data set:
//! seeded normal inputs labelled by a fixed random linear "teacher", so the loss can fall.

use super::train::{self, Config, Optim, Trained};
use rtx::compile::TrainStep;
use rtx::dist::ProcessGroup;
use rtx::prelude::*;

/// `I` inputs, two hidden layers of `H`, `O` classes.
#[model]
pub struct Mlp<const I: usize, const H: usize, const O: usize> {
    fc1: Linear<I, H>,
    fc2: Linear<H, H>,
    fc3: Linear<H, O>,
}

#[model]
impl<const I: usize, const H: usize, const O: usize> Mlp<I, H, O> {
    pub fn forward<B: Dim>(&self, x: &Tensor<(B, Const<I>)>) -> Tensor<(B, Const<O>)> {
        let h = self.fc1.forward(x);
        let h = h.gelu_tanh();
        let h = self.fc2.forward(&h);
        let h = h.gelu_tanh();
        self.fc3.forward(&h)
    }
}

/// A batch of rows of `I` inputs.
type Rows<const I: usize> = Tensor<(usize, Const<I>)>;
/// Each row's class.
type Labels = Tensor<(usize,), i64>;

/// The data set: `items` rows of `I` inputs (row-major) and each row's class.
struct Data<const I: usize> {
    x: Vec<f32>,
    labels: Vec<i64>,
}

impl<const I: usize> Data<I> {
    fn new<const O: usize>(items: usize, seed: u64) -> Self {
        let x: Tensor<(usize, Const<I>)> = Tensor::randn((items, Const), seed, Device::Cpu);
        let teacher: Tensor<(Const<O>, Const<I>)> =
            Tensor::randn((Const, Const), seed + 1, Device::Cpu);
        let (x, t) = (x.to_vec(), teacher.to_vec());
        // Each row's class is the teacher's largest score, computed on the host in f64 so it
        // cannot depend on a device's rounding.
        let labels = x
            .chunks(I)
            .map(|row| {
                let score = |c: usize| -> f64 {
                    let w = &t[c * I..(c + 1) * I];
                    row.iter().zip(w).map(|(a, b)| *a as f64 * *b as f64).sum()
                };
                (0..O)
                    .max_by(|&a, &b| score(a).total_cmp(&score(b)))
                    .unwrap() as i64
            })
            .collect();
        Data { x, labels }
    }

    /// Rows `idx` as a batch on `dev`.
    fn batch(&self, idx: &[usize], dev: Device) -> (Rows<I>, Labels) {
        let x = idx
            .iter()
            .flat_map(|&i| self.x[i * I..(i + 1) * I].iter().copied());
        let y = idx.iter().map(|&i| self.labels[i]).collect();
        (
            Tensor::from_vec(x.collect(), (idx.len(), Const), dev),
            Tensor::from_vec(y, (idx.len(),), dev),
        )
    }
}

/// Trains the MLP `I`-`H`-`H`-`O` under `cfg` on this rank's share.
pub fn run<const I: usize, const H: usize, const O: usize>(
    pg: ProcessGroup,
    dev: Device,
    cfg: &Config,
) -> rtx::Result<Trained<Mlp<I, H, O>>> {
    let data = Data::<I>::new::<O>(cfg.items(), cfg.seed);
    // Each rank starts from its own seed (rank 0's is the run's): DDP's broadcast must make
    // them equal.
    let mut model = Mlp::<I, H, O>::init(&Device::Cpu, cfg.seed + pg.rank() as u64);
    model.move_to(dev);
    model.track_gradients();
    let mut step = TrainStep::new(rtx::compile::loss::cross_entropy);
    let opt = Optim::new(cfg.optim, Optim::Adam(Adam::new(1e-3)));
    train::train(pg, dev, cfg, model, opt, |m, opt, idx| {
        let (x, y) = data.batch(idx, dev);
        Ok(step.run(m, opt, (x,), &y)?.item())
    })
}
