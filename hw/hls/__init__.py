"""HLS C++ of the engine (Vitis HLS 2022.2): the movers ``mm2s_engine`` (the q, k and v movers) and ``s2mm_engine``
(the output mover). The C++ sources live next to this file; the score channels are the PL top's Amaranth
(:mod:`vckattn.hw.pl.engine`), which the xclbin takes and the C-simulation runs Verilated.

The sublayer's movers: ``mm2s_list`` (the list mover: the X, weight and descriptor movers) and ``s2mm_records`` (the R
writer), verified in C-simulation (:mod:`vckattn.sim.sublayer_movers_csim`).
"""
