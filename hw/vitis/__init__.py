"""The Vitis build of an engine design: the linker configuration (:mod:`.system_cfg`, written by ``vckattn hw
generate``), the build flow's tool check, generated sources and UUID recording (:mod:`.flow`) and
``hw/vitis/Makefile``, which runs aiecompiler, ``v++ -c`` (HLS movers), Vivado (the RTL PL top's packaging),
``v++ -l`` and ``v++ -p``."""
