"""Experiments run from the repository (not installed with the package): `python -m research.experiments.NAME` from
the repository root."""
