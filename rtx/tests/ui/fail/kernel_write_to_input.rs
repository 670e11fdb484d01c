use rtx::{Float, kernel};

#[kernel]
fn zero<T: Float>(x: &[T]) {
    x[thread_idx_x()] = 0.0;
}

fn main() {}
