"""FAKE stand-ins for the hardware runtimes (pyxrt, PYNQ, the XRT graph shim) and the card behind
them, for the backend tests. They record calls; none of this is hardware."""
