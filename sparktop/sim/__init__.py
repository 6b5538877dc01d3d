"""Loopback servers that behave like a DGX Spark cluster (SSH nodes, inference servers)."""
