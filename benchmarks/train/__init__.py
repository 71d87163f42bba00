"""Benchmarks of the train subject (see benchmarks/README.md)."""
