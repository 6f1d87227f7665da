"""The scalable attention engine: stream contract v2 (``hw/ENGINE.md``), its generator and the
design the performance model chose."""
