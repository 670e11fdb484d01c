use rtx::{Float, kernel};

#[kernel]
fn scratch<T: Float>(out: &mut [T], n: usize) {
    for i in 0..n {
        #[shared]
        let s: [T; 32];
        s[0] = out[i];
    }
}

fn main() {}
