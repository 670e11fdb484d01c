use rtx::{Float, kernel};

#[kernel]
fn held<T: Float>(x: &[T], out: &mut [T]) {
    let mut v = [0.0; 4];
    let i = x[0];
    v[i] = x[1];
    out[0] = v[0];
}

fn main() {}
