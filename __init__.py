"""vckattn — transformer attention with reduction-free normalizers on AMD Versal.

This file is the root of the one importable package, ``vckattn``. Its
subpackages are the repository's top-level folders:

* ``vckattn.golden`` (``golden/``): PyTorch float models and, later, the bit-exact
  integer model of every hardware operator. The single source of truth for
  numerics; it imports nothing from the other subpackages.
* ``vckattn.hw`` (``hw/``): hardware sources (Amaranth PL components, HLS C++, AIE).
* ``vckattn.sim`` (``sim/``): cocotb testbenches and the simulation runner.
* ``vckattn.host`` (``host/``): bundle loading, device backends and the ``vckattn`` CLI.
"""

__version__ = "0.1.0"
