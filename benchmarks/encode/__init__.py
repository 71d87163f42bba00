"""Benchmarks of the encode subject (see benchmarks/README.md)."""
