"""Benchmarks of the search subject (see benchmarks/README.md)."""
