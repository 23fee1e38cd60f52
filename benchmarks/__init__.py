"""Benchmark suite (not part of the tests): `python -m benchmarks.run --help`."""
