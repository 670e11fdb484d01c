//! (placeholder: filled by the conv work)
