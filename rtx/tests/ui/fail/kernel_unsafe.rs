use rtx::{Float, kernel};

#[kernel]
fn fill<T: Float>(out: &mut [T]) {
    let i = thread_idx_x();
    unsafe {
        out[i] = 1.0;
    }
}

fn main() {}
