"""What the hardware computes, independent of how it is built: engine parameters and the functional model
(``functional``), the stream formats (``streams``), the head schedule, the kernel registry's hardware parts and
the register driver. Imports golden only."""
