"""HLS C++ kernels of the attention build (Vitis HLS 2022.2) and their generated ROM headers.

The C++ sources live next to this file; :mod:`vckattn.hw.hls.tables` writes the ROM and format
headers under ``generated/`` from the golden models (``python -m vckattn.hw.hls.tables``).
"""
