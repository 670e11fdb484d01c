use rtx::{Float, kernel};

#[kernel(elementwise)]
fn softsign<T: Float>(x: T) -> T {
    x / (1.0 + x.abs().sinh())
}

fn main() {}
