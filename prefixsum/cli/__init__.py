"""The command line (``python -m prefixsum ...``) and the benchmark harness the scripts in benchmarks/ use."""
