"""The Vitis build of the attention bitstreams: linker configurations (:mod:`.system_cfg`), the build
flow's tool check and UUID recording (:mod:`.flow`) and ``hw/vitis/Makefile``, which runs aiecompiler,
``v++ -c`` (HLS), Vivado (RTL kernel packaging), ``v++ -l`` and ``v++ -p``."""
