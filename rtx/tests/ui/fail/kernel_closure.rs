use rtx::{Float, kernel};

#[kernel(elementwise)]
fn twice<T: Float>(x: T) -> T {
    let f = |v| v * 2.0;
    f(x)
}

fn main() {}
