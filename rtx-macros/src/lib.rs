//! rtx's procedural macros. `#[model]` and `#[kernel]` arrive with the training and GPU
//! issues; until then this crate only reserves its place at the bottom of the dependency
//! chain (rtx-macros <- rtx-kernels <- rtx-backends <- rtx), so nothing has to move later.

#![warn(missing_docs)]
