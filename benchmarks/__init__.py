"""Benchmarks (not part of the unit tests); run with python -m benchmarks.<name>."""
