"""The build part: the design generator, the catalog of committed builds (``manifest``), the AIE layout, the
design-rule check, the explorer and the simulation of a generated graph. Imports golden, hw.spec, hw.pl and
hw.perf."""
