//! Printing tensors as PyTorch does.
