//! (placeholder: filled by the range work)
