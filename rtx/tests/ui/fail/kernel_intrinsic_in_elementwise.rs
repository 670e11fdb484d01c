use rtx::{Float, kernel};

#[kernel(elementwise)]
fn shifted<T: Float>(x: T) -> T {
    x + thread_idx_x() as T
}

fn main() {}
