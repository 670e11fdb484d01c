//! Neural-network building blocks: the [`Module`] trait every model implements, and layers.

mod model;
mod module;

pub use model::ModelExt;
pub use module::{Module, TensorKind, Visitor, VisitorMut, join};
