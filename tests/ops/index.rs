//! (placeholder: index property tests)
