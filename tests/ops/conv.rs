//! (placeholder: conv property tests)
