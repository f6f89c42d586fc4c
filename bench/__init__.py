"""Benchmarks for harness_store (issue 6). Run them with `python -m bench.run [--quick]`.

Not part of the test suite: nothing here asserts on time. Every number is reported beside its
baseline, measured in the same process and interleaved with it round by round, as a median and
as the median of the per-round ratios.
"""
