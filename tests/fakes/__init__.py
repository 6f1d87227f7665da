"""FAKE stand-ins for the hardware runtimes (pyxrt, PYNQ; a stub of the XRT library in xrt_stub/) and the card behind
them, for the backend tests. They record calls; none of this is hardware."""
