"""Core of the course runtime: `tensor` (Tensor, Function, backward), `autograd`, `layers` (the
Layer base class and Linear) and `activations` (Softmax)."""
