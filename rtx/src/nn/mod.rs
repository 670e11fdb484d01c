//! Neural-network building blocks: the [`Module`] trait every model implements, and layers.

mod module;

pub use module::{Module, TensorKind, Visitor, VisitorMut, join};
