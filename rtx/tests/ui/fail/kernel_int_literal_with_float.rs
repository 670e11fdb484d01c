use rtx::{Float, kernel};

#[kernel(elementwise)]
fn double<T: Float>(x: T) -> T {
    x * 2
}

fn main() {}
