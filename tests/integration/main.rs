//! The root package's integration tests, one binary: each module was its own test binary, and
//! one binary links and instantiates rtx once instead of twenty-three times, and lets the long
//! cases of different modules run side by side. The per-device suite (`tests/devices`) and the
//! op suite (`tests/ops`) stay binaries of their own.

mod lin_model;
/// The MNIST example's models, which the tutorial's tests hold to what the book says.
#[path = "../../examples/mnist/models.rs"]
mod mnist_models;

mod architecture;
mod book;
mod book_compile;
mod checkpoint;
mod compiled;
mod compiled_models;
mod data;
mod ddp;
mod ddp_check;
mod display_parity;
mod dist;
mod first_model;
mod gguf;
mod gpt;
mod hf_checkpoint;
mod interop;
mod ir;
mod ir_exec;
mod ir_ops;
mod mixed_precision;
mod model;
mod nn;
mod optim;
mod static_grad;
mod third_backend;
mod training;
mod user_kernels;
mod writing_kernels;
