"""Host stack: the vckattn CLI, and (later) bundle loading, tiling and device backends."""
