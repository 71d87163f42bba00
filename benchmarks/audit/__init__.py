"""Benchmarks of the audit subject (see benchmarks/README.md)."""
