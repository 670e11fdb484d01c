//! Learning-rate schedules as closed forms of the step number, matching PyTorch's
//! `StepLR`, `CosineAnnealingLR` and `LinearLR` warm-up (followed by another schedule, as
//! `SequentialLR` chains them). Set the rate each step with
//! `opt.set_lr(schedule.lr(step))`.

/// A learning rate as a function of the step number (0 for the first step).
pub trait Schedule {
    /// The learning rate at `step`.
    fn lr(&self, step: usize) -> f64;
}

/// The same rate at every step.
///
/// ```
/// # use rtx::prelude::*;
/// assert_eq!(Constant(0.1).lr(1000), 0.1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Constant(pub f64);

impl Schedule for Constant {
    fn lr(&self, _: usize) -> f64 {
        self.0
    }
}

/// `base_lr * gamma^(step / step_size)` (integer division): the rate drops by `gamma` every
/// `step_size` steps (PyTorch's `StepLR`).
///
/// ```
/// # use rtx::prelude::*;
/// let s = StepLR { base_lr: 1.0, step_size: 10, gamma: 0.5 };
/// assert_eq!((s.lr(9), s.lr(10), s.lr(25)), (1.0, 0.5, 0.25));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepLR {
    /// The rate before the first drop.
    pub base_lr: f64,
    /// Steps between drops (at least 1).
    pub step_size: usize,
    /// The factor of each drop.
    pub gamma: f64,
}

impl Schedule for StepLR {
    fn lr(&self, step: usize) -> f64 {
        let drops = step / self.step_size.max(1);
        self.base_lr * self.gamma.powf(drops as f64)
    }
}

/// `eta_min + (base_lr - eta_min) * (1 + cos(pi * step / t_max)) / 2`: half a cosine from
/// `base_lr` down to `eta_min` over `t_max` steps (PyTorch's `CosineAnnealingLR` closed form,
/// which rises again after `t_max`).
///
/// ```
/// # use rtx::prelude::*;
/// let s = CosineAnnealing { base_lr: 1.0, t_max: 10, eta_min: 0.0 };
/// assert_eq!(s.lr(0), 1.0);
/// assert!((s.lr(5) - 0.5).abs() < 1e-15 && s.lr(10) < 1e-15);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CosineAnnealing {
    /// The rate at step 0.
    pub base_lr: f64,
    /// Steps from `base_lr` to `eta_min` (at least 1).
    pub t_max: usize,
    /// The lowest rate.
    pub eta_min: f64,
}

impl Schedule for CosineAnnealing {
    fn lr(&self, step: usize) -> f64 {
        let t_max = self.t_max.max(1) as f64;
        let cos = (std::f64::consts::PI * step as f64 / t_max).cos();
        self.eta_min + (self.base_lr - self.eta_min) * (1.0 + cos) / 2.0
    }
}

/// A linear warm-up over `warmup` steps from `start_factor * then.lr(0)` towards
/// `then.lr(0)`, after which `then` takes over, counting its steps from 0 (PyTorch's
/// `LinearLR(start_factor, 1.0, warmup)` followed by `then` in a `SequentialLR`).
///
/// ```
/// # use rtx::prelude::*;
/// let s = LinearWarmup { warmup: 4, start_factor: 0.0, then: Constant(1.0) };
/// assert_eq!((s.lr(0), s.lr(1), s.lr(4), s.lr(9)), (0.0, 0.25, 1.0, 1.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinearWarmup<S> {
    /// Steps of warm-up.
    pub warmup: usize,
    /// The fraction of the target rate at step 0.
    pub start_factor: f64,
    /// The schedule after warm-up.
    pub then: S,
}

impl<S: Schedule> Schedule for LinearWarmup<S> {
    fn lr(&self, step: usize) -> f64 {
        if step >= self.warmup {
            return self.then.lr(step - self.warmup);
        }
        let factor =
            self.start_factor + (1.0 - self.start_factor) * step as f64 / self.warmup as f64;
        self.then.lr(0) * factor
    }
}
