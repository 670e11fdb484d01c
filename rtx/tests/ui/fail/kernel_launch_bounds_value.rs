use rtx::{Float, kernel};

// Bounds for `d = 32` name an entry `specialize` does not make.
#[kernel(specialize(d = 64, 128), launch_bounds(256, 1), launch_bounds(128, 3, d = 32))]
fn rows<T: Float>(out: &mut [T], d: usize) {
    let i = thread_idx_x();
    out[i] = d as T;
}

fn main() {}
