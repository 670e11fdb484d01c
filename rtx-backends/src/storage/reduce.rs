//! (placeholder: filled by the reduce work)
