//! Property tests of every op family against naive float64 references, on the CPU backend.
//! One binary (one link) for all families keeps CI fast; each family is a module.
//! Cases are capped by `PROPTEST_CASES` (CI sets it).

mod common;
mod conv;
mod elementwise;
mod grad;
mod grad_elementwise;
mod grad_index;
mod grad_linalg;
mod grad_reduce;
mod grad_shape;
mod index;
mod matmul;
mod random;
mod reduce;
mod scalar;
