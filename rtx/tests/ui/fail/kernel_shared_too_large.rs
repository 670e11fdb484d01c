use rtx::{Float, kernel};

#[kernel]
fn scratch<T: Float>(out: &mut [T]) {
    #[shared]
    let s: [T; 32768];
    s[0] = out[0];
    out[0] = s[0];
}

fn main() {}
