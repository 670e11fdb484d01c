//! (placeholder: filled by the matmul work)
