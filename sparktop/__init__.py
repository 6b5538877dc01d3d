"""sparktop: a terminal monitor for vLLM on small clusters of NVIDIA DGX Spark (GB10) nodes."""

__version__ = "0.1.0"
