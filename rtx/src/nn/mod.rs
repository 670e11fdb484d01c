//! Neural-network building blocks: the [`Module`] trait every model implements, seeded
//! initializers ([`init`]), layers (one per file) and loss functions.

mod activation;
mod attention;
mod batch_norm;
mod conv1d;
mod conv2d;
mod dropout;
mod embedding;
mod fused_norm;
pub mod init;
mod layer_norm;
mod linear;
pub(crate) mod loss;
pub(crate) mod model;
mod module;
mod pool;
mod rms_norm;

pub use activation::{GELU, ReLU, SiLU, Sigmoid, Tanh};
pub use attention::CausalSelfAttention;
pub use batch_norm::{BatchNorm, BatchNorm1d, BatchNorm2d};
pub use conv1d::Conv1d;
pub use conv2d::Conv2d;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use fused_norm::rms_norm;
pub use init::Init;
pub use layer_norm::LayerNorm;
pub use linear::{Linear, LinearOut};
pub use loss::{
    CrossEntropy, binary_cross_entropy_with_logits, cross_entropy, cross_entropy_with, l1_loss,
    mse_loss, nll_loss, try_cross_entropy_with, try_nll_loss,
};
pub use model::ModelExt;
pub(crate) use model::short_type_name;
pub use module::{Module, TensorKind, Visitor, VisitorMut, join};
pub use pool::{AvgPool2d, MaxPool2d};
pub use rms_norm::RMSNorm;
