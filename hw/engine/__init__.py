"""The scalable attention engine (issue #16): stream contract v2 (``hw/ENGINE.md``), its generator and the
design the performance model chose."""
