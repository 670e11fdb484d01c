//! (placeholder: random property tests)
