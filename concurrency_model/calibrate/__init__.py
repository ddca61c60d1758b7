"""Calibration: microbenchmarks on this machine and fits of the timing model's efficiency constants."""
