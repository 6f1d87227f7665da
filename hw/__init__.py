"""Hardware sources: Amaranth PL components (pl/), HLS C++ (hls/), AIE kernels (aie/)."""
