"""Benchmarks of lengthwise, by subject: each runs from the repository root as
`python -m benchmarks.<subject>.<name>` (benchmarks/README.md)."""
