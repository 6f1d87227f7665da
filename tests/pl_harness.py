"""Drive an Amaranth datapath with a clock enable ``en`` in Amaranth's simulator (unit tests of lanes).

:func:`run_pipeline` feeds one input vector per enabled cycle, stalls randomly (``en`` low,
inputs replaced by garbage), and collects each output exactly ``LATENCY`` enabled cycles later.
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator


def run_pipeline(dut, inputs: dict[str, np.ndarray], outputs: tuple[str, ...], constants: dict[str, int] | None = None,
                 stall_prob: float = 0.3, seed: int = 0) -> dict[str, np.ndarray]:
    n = len(next(iter(inputs.values())))
    rng = np.random.default_rng(seed)
    got: dict[str, list[int]] = {o: [] for o in outputs}

    async def bench(ctx):
        for k, v in (constants or {}).items():
            ctx.set(getattr(dut, k), int(v))
        fed, in_flight = 0, []
        while len(got[outputs[0]]) < n:
            en = int(rng.random() >= stall_prob)
            ctx.set(dut.en, en)
            for name, vals in inputs.items():
                sig = getattr(dut, name)
                if en and fed < n:
                    ctx.set(sig, int(vals[fed]))
                else:  # garbage while stalled or drained: must not matter
                    ctx.set(sig, int(rng.integers(0, 1 << min(len(sig), 62))) if not sig.shape().signed
                            else int(rng.integers(-(1 << (len(sig) - 1)), 1 << (len(sig) - 1))))
            await ctx.tick()
            if en:
                in_flight = [c + 1 for c in in_flight]
                if fed < n:
                    in_flight.append(1)
                    fed += 1
                if in_flight and in_flight[0] == dut.LATENCY:
                    for o in outputs:
                        got[o].append(ctx.get(getattr(dut, o)))
                    in_flight.pop(0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return {o: np.array(v) for o, v in got.items()}
