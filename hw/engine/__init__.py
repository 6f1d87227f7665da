"""The scalable attention engine: stream contract v3 (``hw/ENGINE.md``), its generator and the
design the performance model chose."""
