use rtx::{Num, kernel};

// A kernel over `T: Num` is instantiated for integers too, so float math is not available.
#[kernel(elementwise)]
fn grow<T: Num>(x: T) -> T {
    x.exp()
}

fn main() {}
