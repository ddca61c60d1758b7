"""Predicted vs measured: every dataset in ``data/`` through its predictor."""
