"""Performance benchmarks (not tests): each prints a ratio against a reference of the same run."""
