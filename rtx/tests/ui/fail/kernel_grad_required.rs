use rtx::{Float, kernel};

#[kernel(elementwise, grad)]
fn cube<T: Float>(x: T) -> T {
    let mut y = x;
    y *= x * x;
    y
}

fn main() {}
