//! rtx's procedural macros: `#[model]` (and, later, `#[kernel]`).
//!
//! The crate sits at the bottom of the dependency chain (rtx-macros <- rtx-kernels <-
//! rtx-backends <- rtx). Users reach the macros through `rtx` (`rtx::model`), and the code
//! they emit names rtx's items only through the hidden `::rtx::__private` module, so a user
//! crate depends on `rtx` alone.

#![warn(missing_docs)]

mod model;

use proc_macro::TokenStream;

/// Makes a struct a model: implements `rtx::nn::Module` by visiting each field under its
/// name, so parameters are named like PyTorch's (`blocks.2.attn.weight`), and `rtx::nn::Init`,
/// so `Net::init(&device, seed)` builds it with every parameter seeded from the model seed and
/// its own name.
///
/// Fields, in declaration order:
/// - a `Tensor` is a parameter named after its field;
/// - a layer or model (anything implementing `Module`, including `[M; N]` and `Vec<M>`) is
///   visited with the field's name as prefix;
/// - `#[buffer]` marks a tensor that is saved with the model but not trained (running
///   statistics);
/// - `#[skip]` leaves a field out (hyperparameters, seeds, configuration).
///
/// `#[init(expr)]` on a field builds it with `expr` instead, with `device: &Device`,
/// `seed: u64` (the model seed) and `prefix: &str` (the field's name prefix, `blocks.`) in
/// scope; a `#[skip]` field without it is `Default::default()`. A field whose type cannot be
/// built from a device and a seed (a `Vec`, a hand-written layer without `Init`) needs
/// `#[init(..)]`; the compile error at the field says so.
///
/// Any other field is a compile error at that field. Everything else a model can do
/// (`summary`, `freeze`, `train`/`eval`, moving between devices) comes from
/// `rtx::nn::ModelExt`, written once against `Module`.
///
/// On an `impl` block, `#[model]` will compile the forward pass; that half is not implemented
/// yet, and using it is a compile error that says so.
#[proc_macro_attribute]
pub fn model(attr: TokenStream, item: TokenStream) -> TokenStream {
    model::expand(attr.into(), item.into()).into()
}
