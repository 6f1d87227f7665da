"""Repository tools (not installed with the package): ``regen.py`` (``make regen``) and the README/docs blocks
it writes (``figures.py``)."""
