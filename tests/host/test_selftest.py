"""``vckattn board selftest`` (host/selftest.py) on the small engine: on the emulated card (``VCKATTN_EMULATION=csim``,
the engine's C-simulation behind the xrt backend), and on the FAKE engine card (tests/fakes/engine_card.py) behind the
FAKE pyxrt with the real C++ shim on the STUB XRT library, and behind the FAKE pynq. None of this is hardware.
Every failure is injected below our code (the fake card, the emulated card's C-simulation) and must fail the named
check with its exit status; the expected outputs come from the integer golden model."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from fakes import fake_pynq, fake_pyxrt
from fakes.engine_card import FakeEngineCard
from fakes.xrt_stub import card_handler
from hw_jobs import OTHER_UUID, manifest_edit, manifest_with_uuid, write_xclbin

from vckattn.golden.stages import attention_int
from vckattn.host.cli import main
from vckattn.host.selftest import CHECKS, known_layer
from vckattn.hw.design.manifest import load_manifest

MANIFEST = manifest_with_uuid("engine_small")


def _selftest(capsys, *argv: str) -> tuple[int, list[str], str, dict]:
    """Run the CLI; ``(status, stdout lines, stderr, the JSON report)``."""
    js = argv[argv.index("--json") + 1]
    code = main(["board", "selftest", *argv])
    out, err = capsys.readouterr()
    with open(js, encoding="utf-8") as f:
        return code, out.splitlines(), err, json.load(f)


def _statuses(rep: dict) -> dict[str, str]:
    return {c["name"]: c["status"] for c in rep["checks"]}


# ------------------------------------------------------------------------------------------ the emulated card


@pytest.mark.tool("g++", "hls4ml", "verilator")
def test_emulated_selftest_passes(monkeypatch, tmp_path, capsys):
    """``VCKATTN_EMULATION=csim vckattn board selftest --manifest engine_small``: four PASS lines, status 0."""
    monkeypatch.setenv("VCKATTN_EMULATION", "csim")
    js = tmp_path / "st.json"
    code, lines, err, rep = _selftest(capsys, "--manifest", "engine_small", "--json", str(js))
    assert code == 0, err
    assert [ln.split()[:2] for ln in lines if ln.split()[:1] in (["PASS"], ["FAIL"], ["SKIP"])] == \
        [["PASS", c] for c in CHECKS]
    assert lines[-2] == "selftest: PASS (4 of 4 checks passed)"
    assert rep["passed"] and rep["exit_code"] == 0 and rep["emulated"] and [c["name"] for c in rep["checks"]] == \
        list(CHECKS)
    xclbin, regs, tiles, timing = rep["checks"]
    assert xclbin["uuid"] == xclbin["manifest_uuid"] and "no xclbin read" in xclbin["detail"]
    assert regs["registers"] and all(r["word"] == r["readback"] for r in regs["registers"])
    assert tiles["bit_exact"] and tiles["tiles"] == 2 * 4 * 3  # 45 tokens: 3 row tiles of 16 per head
    assert "the emulator's wall time on this machine, not a board time" in timing["detail"]
    assert timing["measured"]["launch_seconds"] > 0 and timing["predicted"]["modeled"]
    assert timing["predicted"]["seconds_per_layer"] > 0


@pytest.mark.tool("g++", "hls4ml", "verilator")
def test_emulated_wrong_result_is_status_1(monkeypatch, tmp_path, capsys):
    """One output byte of the emulated card's C-simulation flipped: the tiles check fails, status 1."""
    import vckattn.sim.engine_csim as csim

    real = csim.run_engine_launch

    def flipped(*args, **kwargs):
        res = real(*args, **kwargs)
        res.a[0, 0, 0] ^= 1
        return res

    monkeypatch.setattr(csim, "run_engine_launch", flipped)
    monkeypatch.setenv("VCKATTN_EMULATION", "csim")
    code, lines, err, rep = _selftest(capsys, "--manifest", "engine_small", "--json", str(tmp_path / "st.json"))
    assert code == 1
    assert _statuses(rep) == {"xclbin": "PASS", "registers": "PASS", "tiles": "FAIL", "timing": "SKIP"}
    assert err.startswith("vckattn: error: board selftest failed: check tiles: run 1: int8 head outputs not "
                          "bit-exact") and len(err.strip().splitlines()) == 1
    assert "1 of " in rep["checks"][2]["detail"] and rep["checks"][2]["exit_code"] == 1


# ------------------------------------------------------------------------------------------ a (fake) card


@pytest.fixture
def card(monkeypatch, tmp_path, xrt_stub):
    """``card(**knobs) -> (fake card, manifest file, xclbin file)`` behind the fake pyxrt and the stub XRT library."""
    def make(manifest=MANIFEST, card_manifest=None, **knobs):
        c = FakeEngineCard(card_manifest or MANIFEST, **knobs)
        monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(c))
        xrt_stub.set_handler(card_handler(c))
        mfile = tmp_path / "engine_small.json"
        mfile.write_text(json.dumps(manifest.data))
        return c, mfile, write_xclbin(tmp_path / "engine_small.xclbin")
    return make


def test_card_selftest_passes(card, tmp_path, capsys):
    c, mfile, xclbin = card()
    code, lines, err, rep = _selftest(capsys, "--manifest", str(mfile), "--xclbin", str(xclbin),
                                      "--json", str(tmp_path / "st.json"))
    assert code == 0, err
    assert _statuses(rep) == dict.fromkeys(CHECKS, "PASS") and not rep["emulated"]
    assert rep["checks"][0]["uuid"] == MANIFEST.uuid and f"UUID {MANIFEST.uuid} is engine_small's" in lines[2]
    assert "measured on this device" in rep["checks"][3]["detail"]
    # the card ran the known layer twice, 12 tiles a pipeline (8 groups of 3 tiles on 2 pipelines)
    assert [e["tiles"] for e in c.ops("computed")] == [12, 12, 12, 12]


def test_card_register_readback_mismatch_is_status_7(card, tmp_path, capsys):
    regs = {r["name"]: r for r in MANIFEST.kernel("engine_pl")["registers"]}
    off = int(regs["a_mult"]["offset"])
    c, mfile, xclbin = card(stuck={("engine_pl", off): 0x5A5A})
    code, lines, err, rep = _selftest(capsys, "--manifest", str(mfile), "--xclbin", str(xclbin),
                                      "--json", str(tmp_path / "st.json"))
    assert code == 7
    assert _statuses(rep)["registers"] == "FAIL" and rep["checks"][1]["exit_code"] == 7
    assert "a_mult" in rep["checks"][1]["detail"]
    assert any(ln.startswith("FAIL  registers") for ln in lines)
    assert err.startswith("vckattn: error: board selftest failed: check registers:")


def test_card_wrong_results_are_status_1(card, tmp_path, capsys):
    """The host writes two SwiftMax registers at each other's offsets (its manifest swapped, the card's not): every
    register reads back as written, but the results are not golden's."""
    def swap(data):
        regs = next(k for k in data["kernels"] if k["name"] == "engine_pl")["registers"]
        a, s = (next(r for r in regs if r["name"] == n) for n in ("u_lo", "u_hi"))
        a["offset"], s["offset"] = s["offset"], a["offset"]
    c, mfile, xclbin = card(manifest=manifest_edit(MANIFEST, swap), card_manifest=MANIFEST)
    code, lines, err, rep = _selftest(capsys, "--manifest", str(mfile), "--xclbin", str(xclbin),
                                      "--json", str(tmp_path / "st.json"))
    assert code == 1
    assert _statuses(rep) == {"xclbin": "PASS", "registers": "PASS", "tiles": "FAIL", "timing": "SKIP"}
    assert "not bit-exact vs the integer golden model" in rep["checks"][2]["detail"]


def test_card_wrong_uuid_is_status_7(card, tmp_path, capsys):
    c, mfile, xclbin = card(xclbin_uuid=OTHER_UUID)
    code, lines, err, rep = _selftest(capsys, "--manifest", str(mfile), "--xclbin", str(xclbin),
                                      "--json", str(tmp_path / "st.json"))
    assert code == 7
    assert _statuses(rep) == {"xclbin": "FAIL", "registers": "SKIP", "tiles": "SKIP", "timing": "SKIP"}
    assert f"xclbin UUID {OTHER_UUID} does not match" in rep["checks"][0]["detail"]
    assert lines[-2] == "selftest: FAIL (0 of 4 checks passed)"


def test_no_xrt_is_status_6(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pyxrt", None)
    mfile = tmp_path / "engine_small.json"
    mfile.write_text(json.dumps(MANIFEST.data))
    code, lines, err, rep = _selftest(capsys, "--manifest", str(mfile), "--xclbin",
                                      str(write_xclbin(tmp_path / "a.xclbin")), "--json", str(tmp_path / "st.json"))
    assert code == 6 and _statuses(rep)["xclbin"] == "FAIL"
    assert "XRT not found: cannot import pyxrt" in err and len(err.strip().splitlines()) == 1


def test_pynq_selftest_passes(monkeypatch, tmp_path, capsys):
    """``--backend pynq`` on the FAKE engine card behind the FAKE pynq (no UUID: an overlay records none)."""
    m = manifest_with_uuid("engine_small", None)
    c = FakeEngineCard(m)
    monkeypatch.setitem(sys.modules, "pynq", fake_pynq.module_for(c, None))
    mfile = tmp_path / "engine_small.json"
    mfile.write_text(json.dumps(m.data))
    code, lines, err, rep = _selftest(capsys, "--manifest", str(mfile), "--backend", "pynq", "--xclbin",
                                      str(write_xclbin(tmp_path / "a.xclbin")), "--json", str(tmp_path / "st.json"))
    assert code == 0, err
    assert _statuses(rep) == dict.fromkeys(CHECKS, "PASS") and rep["backend"] == "pynq"
    assert "PYNQ reads no UUID" in rep["checks"][0]["detail"]


@pytest.mark.parametrize(("env", "argv", "status", "message"), [
    ("", ["--manifest", "NOENGINE", "--xclbin", "X"], 5, "'engine' is a required property"),
    ("csim", ["--manifest", "sublayer_small_encoder"], 2, "sublayer_small_encoder is a sublayer build: its GEMM stages "
     "have no xclbin flow"),
    ("", ["--manifest", "engine_small"], 2, "needs --xclbin"),
    ("csim", ["--manifest", "engine_small", "--backend", "pynq", "--xclbin", "X"], 2,
     "VCKATTN_EMULATION=csim emulates the xrt backend's card; unset it for --backend pynq"),
    ("", ["--manifest", "no_such_build"], 5, "no_such_build"),
    ("csim", ["--manifest", "engine_small", "--device", "-1"], 2, "--device is a card index"),
    ("csim", ["--manifest", "engine_small", "--timeout-ms", "0"], 2, "must be >= 1 ms"),
    ("csim", ["--manifest", "engine_small", "--json", "/no/such/folder/st.json"], 4, "does not exist"),
])
def test_refusals(monkeypatch, tmp_path, capsys, env, argv, status, message):
    monkeypatch.setenv("VCKATTN_EMULATION", env)
    if "NOENGINE" in argv:  # a manifest without an engine section
        data = {k: v for k, v in load_manifest("engine_small").data.items() if k != "engine"}
        (tmp_path / "noengine.json").write_text(json.dumps(data))
    argv = [str(write_xclbin(tmp_path / "a.xclbin")) if a == "X" else
            str(tmp_path / "noengine.json") if a == "NOENGINE" else a for a in argv]
    assert main(["board", "selftest", *argv]) == status
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_known_layer_is_deterministic():
    a, x1, k1 = known_layer(MANIFEST)
    b, x2, k2 = known_layer(MANIFEST)
    assert np.array_equal(x1, x2) and np.array_equal(k1, k2)
    assert np.array_equal(attention_int(a, x1, k1)[0], attention_int(b, x2, k2)[0])
    assert a.score_bits == 8 and int(k1[-1].sum()) == 30
