"""Benchmarks of what sparktop costs and how it scales: ``python benchmarks/run_all.py``."""
