//! rtx-models' integration tests, one binary: each module was its own test binary, and one
//! binary links the model code once instead of three times, and lets the llama and MiniLM
//! cases, the longest, run side by side.

mod batch;
mod llama;
mod minilm;
mod tokenizer;
