"""Parallel training: data, tensor, pipeline, hybrid parallelism and the memory footprint per device."""
