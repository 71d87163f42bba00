"""Benchmarks of the serve subject (see benchmarks/README.md)."""
