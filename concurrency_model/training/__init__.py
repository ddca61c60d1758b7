"""A training step composed from the parallel strategies: workload, step expression, estimate, run."""
