"""Comparison of many masking configurations on one file: the grid, its run, the rankings and their outputs."""
