//! Typed tensors at work: shapes and element types checked by the compiler, run-time batch
//! sizes checked when ops run, and a tiny two-layer forward pass on the CPU.
//!
//! Run with `cargo run --release --example tensors`.

use rtx::prelude::*;

// ANCHOR: shapes
/// A batch of 784-pixel images: the batch size is a named run-time dim, the rest is static.
type Images = (Dyn<'B'>, Const<784>);
// ANCHOR_END: shapes

fn main() -> rtx::Result<()> {
    // The CPU: on a GPU, `Device::best()` would pick `cuda:0`, where random numbers and
    // argmax have no kernel yet (see benches/README.md for what runs on the GPU so far).
    let device = Device::Cpu;
    println!("device: {device}");

    // ANCHOR: create
    let a: Tensor<Rank2<2, 3>> = Tensor::from_array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device);
    let b: Tensor<Rank1<3>> = Tensor::from_array([10.0, 20.0, 30.0], device);
    let c = &a + &b; // [2, 3] + [3]: b broadcasts over the rows
    println!("a + b =\n{c}");
    // ANCHOR_END: create

    // ANCHOR: views
    let t = c.t(); // a view: no copy
    assert!(t.shares_storage_with(&c));
    let flat: Tensor<Rank1<6>> = c.reshape((Const,));
    println!("transposed =\n{t}\nflat = {flat}");
    // ANCHOR_END: views

    // ANCHOR: forward
    let batch = 4;
    let x: Tensor<Images> = Tensor::rand((Dyn(batch), Const), 0, device);
    let w1: Tensor<Rank2<784, 128>> = Tensor::randn((Const, Const), 1, device) * 0.05;
    let b1: Tensor<Rank1<128>> = Tensor::zeros((Const,), device);
    let w2: Tensor<Rank2<128, 10>> = Tensor::randn((Const, Const), 2, device) * 0.05;

    let hidden = (x.matmul(&w1) + &b1).relu(); // [B, 784] x [784, 128] -> [B, 128]
    let logits = hidden.matmul(&w2); //           [B, 128] x [128, 10]  -> [B, 10]
    let probs = logits.softmax::<1>();
    let predicted = probs.argmax::<1>(); //       [B] of i64
    println!("class probabilities =\n{probs}");
    println!("predicted classes = {predicted}");
    // ANCHOR_END: forward

    // ANCHOR: errors
    // Run-time sizes are checked when the op runs; the `try_` form returns the error.
    let dynamic: Tensor<(usize, usize)> = a.reshape((2, 3));
    let wrong_inner: Tensor<(usize, usize)> = Tensor::zeros((4, 5), device);
    match dynamic.try_matmul(&wrong_inner) {
        Ok(_) => println!("unexpected: the product ran"),
        Err(e) => println!("error: {e}"),
    }
    // ANCHOR_END: errors
    Ok(())
}
