//! (placeholder: filled by the join work)
