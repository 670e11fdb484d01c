//! (placeholder: elementwise property tests)
