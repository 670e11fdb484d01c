use rtx::{Float, kernel};

#[kernel(specialize(scale = 2))]
fn scaled<T: Float>(out: &mut [T], scale: f64) {
    let i = thread_idx_x();
    out[i] = scale as T;
}

fn main() {}
