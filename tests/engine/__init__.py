"""Tests of ``streamforest.engine``: the pure engine, its checkpoints, runtime and metrics."""
