use rtx::{Float, kernel};

#[kernel]
fn held<T: Float>(x: &[T], out: &mut [T], n: usize) {
    let mut v = [T::NEG_INFINITY; n];
    v[0] = x[0];
    out[0] = v[0];
}

fn main() {}
