"""Course runtime for grading: the TinyTorch API that module-11 code imports (no module-11 code)."""

__version__ = "0.1.0"
