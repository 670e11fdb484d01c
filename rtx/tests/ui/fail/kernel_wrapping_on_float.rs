use rtx::{Float, kernel};

// Wrapping arithmetic is for integers (the Philox kernels' `u32` words), not for `T`.
#[kernel(elementwise)]
fn bump<T: Float>(x: T) -> T {
    x.wrapping_add(1.0)
}

fn main() {}
