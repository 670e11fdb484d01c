//! Activation layers (`ReLU`, `GELU`, `SiLU`, `Sigmoid`, `Tanh`): parameter-free modules that
//! apply the matching elementwise op, so they can sit in a model's layer list.

use super::init::Init;
use super::module::{Module, Visitor, VisitorMut};
use crate::shape::Shape;
use crate::tensor::Tensor;
use rtx_backends::Device;
use rtx_kernels::Float;

macro_rules! activation {
    ($(#[$doc:meta])* $name:ident => $op:ident, $example:literal) => {
        $(#[$doc])*
        #[doc = concat!(
            "```\n# use rtx::prelude::*;\nlet x: Tensor<Rank1<2>> = Tensor::from_array([-1.0, 2.0], Device::Cpu);\nassert_eq!(",
            stringify!($name), ".forward(&x).to_vec(), x.", stringify!($op), "().to_vec());\n",
            $example, "\n```"
        )]
        #[derive(Clone, Copy, Debug, Default)]
        pub struct $name;

        impl $name {
            #[doc = concat!("Applies `", stringify!($op), "` elementwise.")]
            pub fn forward<S: Shape, E: Float>(&self, x: &Tensor<S, E>) -> Tensor<S, E> {
                x.$op()
            }
        }

        impl Module for $name {
            fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        v.leave(prefix);
    }
            fn visit_mut<V: VisitorMut>(&mut self, _: &str, _: &mut V) {}
        }

        impl Init for $name {
            fn init_named(_device: &Device, _seed: u64, _prefix: &str) -> Self {
                $name
            }
        }
    };
}

activation!(
    /// `max(x, 0)` (PyTorch's `nn.ReLU`).
    ReLU => relu, "assert_eq!(ReLU.forward(&x).to_vec(), vec![0.0, 2.0]);"
);
activation!(
    /// `x * sigmoid(x)` (PyTorch's `nn.SiLU`).
    SiLU => silu, ""
);
activation!(
    /// `1 / (1 + e^-x)` (PyTorch's `nn.Sigmoid`).
    Sigmoid => sigmoid, ""
);
activation!(
    /// The hyperbolic tangent (PyTorch's `nn.Tanh`).
    Tanh => tanh, ""
);

/// The Gaussian error linear unit (PyTorch's `nn.GELU`): exact (`x * Φ(x)`, with erf) by
/// default, or the tanh approximation when `tanh` is set (`approximate='tanh'`).
///
/// ```
/// # use rtx::prelude::*;
/// let x: Tensor<Rank1<2>> = Tensor::from_array([-1.0, 2.0], Device::Cpu);
/// assert_eq!(GELU::default().forward(&x).to_vec(), x.gelu().to_vec());
/// assert_eq!(GELU { tanh: true }.forward(&x).to_vec(), x.gelu_tanh().to_vec());
/// ```
#[allow(clippy::upper_case_acronyms)] // PyTorch's name, kept so model code ports verbatim.
#[derive(Clone, Copy, Debug, Default)]
pub struct GELU {
    /// Use the tanh approximation.
    pub tanh: bool,
}

impl GELU {
    /// Applies GELU elementwise (exact or tanh-approximated, as configured).
    pub fn forward<S: Shape, E: Float>(&self, x: &Tensor<S, E>) -> Tensor<S, E> {
        if self.tanh { x.gelu_tanh() } else { x.gelu() }
    }
}

/// The exact form; give the field `#[init(GELU { tanh: true })]` for the tanh form.
impl Init for GELU {
    fn init_named(_device: &Device, _seed: u64, _prefix: &str) -> Self {
        GELU::default()
    }
}

impl Module for GELU {
    fn visit<V: Visitor>(&self, prefix: &str, v: &mut V) {
        v.enter(prefix, std::any::type_name::<Self>());
        v.leave(prefix);
    }
    fn visit_mut<V: VisitorMut>(&mut self, _: &str, _: &mut V) {}
}
