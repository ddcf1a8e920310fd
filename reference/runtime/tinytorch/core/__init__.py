"""Core of the course runtime: `tensor` (Tensor, Function, backward) and `autograd`."""
