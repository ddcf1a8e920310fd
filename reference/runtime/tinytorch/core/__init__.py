"""Core of the course runtime: `tensor` (Tensor, Function, backward), `autograd` and `layers` (the
Layer base class)."""
