"""Performance model of the VCK5000 attention block (modeled figures, not board measurements)."""
