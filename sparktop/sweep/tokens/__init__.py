"""Counting what a prompt costs in tokens: estimated from characters (``tokens``), exact
from a server's tokenize endpoint or a ``tokenizer.json`` (``exact_tokens``), and whole
folders (``scan``).
"""
