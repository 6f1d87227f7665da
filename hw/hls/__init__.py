"""HLS C++ of the engine (Vitis HLS 2022.2) and their generated ROM headers: the movers ``mm2s_engine`` and
``s2mm_engine``, the engine's normalizers ``swiftmax_engine_hls`` and ``online_softmax_engine_hls``, the HLS SwiftMax
``swiftmax_hls`` (the element code the engine's reuses, C-simulated on its own) and the BHyT sites ``bhyt_hls``.

The C++ sources live next to this file; :mod:`vckattn.hw.hls.tables` writes the ROM and format
headers under ``generated/`` from the golden models (``make regen``).
"""
