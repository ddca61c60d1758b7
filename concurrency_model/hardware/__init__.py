"""Devices and clusters: the machines a step runs on (presets in ``presets/devices`` and ``presets/clusters``)."""
