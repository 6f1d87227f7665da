"""Small, reproducible experiments (CPU) behind the README's figures; outputs go to ``results/experiments/``."""
