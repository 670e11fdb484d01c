//! (placeholder: filled by the random work)
