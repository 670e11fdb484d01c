//! A user crate's kernels over `T: Num` and `T: Element` compile against `rtx` alone, and their
//! native versions compute integer and float results alike.

use rtx::{Element, Num, kernel};

#[kernel(elementwise)]
fn half_step<T: Num>(x: T, #[uniform] lo: T) -> T {
    (x - lo).max(x.abs()) / (1.0 + 1.0)
}

#[kernel(elementwise)]
fn pick<T: Element>(c: bool, a: T, b: T) -> T {
    if c { a } else { b }
}

#[kernel(reduce(identity = T::LOWEST))]
fn biggest<T: Num>(acc: T, x: T) -> T {
    acc.max(x)
}

fn main() {
    assert_eq!(half_step(7i32, 3), 3);
    assert_eq!(half_step(7.0f32, 3.0), 3.5);
    assert_eq!(half_step(250u8, 10), 125);
    assert!(!pick(false, true, false));
    let (v, _) = biggest::reduce_axis(&[3u8, 250, 7], &[3], 0, false).unwrap();
    assert_eq!(v, vec![250]);
    assert_eq!(half_step::KERNEL.entries.len(), 2 * 7);
    assert_eq!(pick::KERNEL.entries.len(), 2 * 8);
}
