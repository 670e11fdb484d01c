//! (placeholder: filled by the index work)
