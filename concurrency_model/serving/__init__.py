"""Serving: inference of a model on a cluster, from one forward pass to an engine under load."""
