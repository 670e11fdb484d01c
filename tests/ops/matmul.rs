//! (placeholder: matmul property tests)
