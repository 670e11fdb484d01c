//! (placeholder: reduce property tests)
