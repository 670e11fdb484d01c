//! Pretrained model families for rtx, with their loaders and tokenizers: the crate that keeps
//! `tokenizers` and model-specific code out of the core `rtx` crate.

pub mod bert;
// pub mod sentence;

// pub use sentence::SentenceEncoder;
