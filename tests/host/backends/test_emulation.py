"""``VCKATTN_EMULATION=csim``: the ``xrt`` backend of an engine build on the emulated card (host/backends/emulation.py),
whose kernels are the engine's C-simulation (g++ + AMD's ap_types). The backend's host code is the one that drives a
card; the results must equal the emu backend's (and golden's narrow-score layer) bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hw_jobs import write_xclbin

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.errors import UserError
from vckattn.golden.quant_attention import calibrate_attention, narrow_layer
from vckattn.golden.stages import attention_int
from vckattn.host.attention_layer import run_layer
from vckattn.host.backends import device_class
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.emulation import RegisterFile, emulated_uuid
from vckattn.hw.design.manifest import ManifestError, load_manifest

pytestmark = pytest.mark.tool("g++", "hls4ml", "verilator")

MANIFEST = load_manifest("engine_small")
TEXT = "The emulated card runs the host code a VCK5000 would, and the engine's C++ computes."


def _layer(batch=2, heads=4, seq=45, causal=False, seed=0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(32 * heads, heads).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, 32 * heads))
    keep = np.ones((batch, seq), bool)
    keep[-1, seq * 2 // 3:] = False
    return narrow_layer(calibrate_attention(mha, x, keep, "swiftmax", causal=causal, beta=3.0, gamma=5.0), 8), x, keep


@pytest.fixture
def emulation(monkeypatch):
    monkeypatch.setenv("VCKATTN_EMULATION", "csim")


@pytest.mark.parametrize(("batch", "heads", "causal"), [(2, 4, False), (1, 3, True)])
def test_bit_identical_to_emu(emulation, batch, heads, causal):
    """Equal pipelines, and unequal ones (the short pipeline runs a group of pipeline 0 again so every AIE kernel
    runs the graph's one iteration count; the C-simulation computes it too)."""
    layer, x, keep = _layer(batch, heads, causal=causal, seed=heads)
    with device_class("xrt")(MANIFEST) as dev:  # no xclbin: the manifest names the design
        assert dev.where.startswith("emulation (VCKATTN_EMULATION=csim)")
        got = run_layer(dev, layer, x, keep)
        regs = dev.verify_registers()  # read back from the emulated register file, exactly
        assert dev.uuid == emulated_uuid(MANIFEST)
    with device_class("emu")(MANIFEST) as emu:
        ref = run_layer(emu, layer, x, keep)
    assert np.array_equal(got.out, ref.out) and np.array_equal(got.y, ref.y)
    assert np.array_equal(got.out, attention_int(layer, x, keep)[0])
    assert len(regs) == len(dev.written)


def test_graph_iterations_are_checked(emulation, monkeypatch):
    """Without balancing, a launch whose pipelines get different tile counts cannot run on a graph started for one
    count: the emulated card times out as a card would."""
    from vckattn.host.backends.xrt import XrtDevice

    layer, x, keep = _layer(1, 3)
    monkeypatch.setattr(XrtDevice, "balance", False)
    with pytest.raises(DeviceError, match=r"device timeout after 50 ms in (s2mm_engine_1|the AIE graph)"), \
            device_class("xrt")(MANIFEST, timeout_ms=50) as dev:
        run_layer(dev, layer, x, keep)


def test_register_file_as_the_map_declares():
    rf = RegisterFile(list(MANIFEST.kernel("engine_pl")["registers"]))
    regs = {r["name"]: r for r in MANIFEST.kernel("engine_pl")["registers"]}
    assert rf.read(0) == int(regs["ID"]["value"])
    rf.write(0, 0x1234)  # a constant: the write changes nothing
    assert rf.read(0) == int(regs["ID"]["value"])
    a = int(regs["a_mult"]["offset"])
    rf.write(a, 0xFFFFFFFF)  # 24-bit signed: -1, read back sign-extended
    assert rf.read(a) == 0xFFFFFFFF and rf.value("a_mult") == -1
    rf.write(a, 0x00FFFFFE + 0x7F000000)  # bits above the width are dropped
    assert rf.value("a_mult") == -2
    b = int(regs["b_beta"]["offset"])
    rf.write(b + 4 * 3, 5)
    assert rf.value("b_beta", 3) == 5 and rf.swiftmax()[3].b_beta == 5


def test_cli_run_minilm(emulation, minilm_heads_bundle, tmp_path, capsys):
    """``VCKATTN_EMULATION=csim vckattn run --backend xrt --manifest engine_small``: bit-exact, no --xclbin."""
    from vckattn.host.cli import main

    js = tmp_path / "r.json"
    code = main(["run", "--bundle", str(minilm_heads_bundle), "--manifest", "engine_small", "--backend", "xrt",
                 "--text", TEXT, "--json", str(js), "--quiet", "--min-cosine", "0.95"])
    err = capsys.readouterr().err
    assert code == 0, err
    rep = json.loads(js.read_text())
    assert rep["backend"] == "xrt" and rep["device"].startswith("emulation")
    assert [r["bit_exact"] for r in rep["layers"]] == [True, True]


def test_refusals(monkeypatch, minilm_bundle, tmp_path, capsys):
    from vckattn.host.cli import main

    monkeypatch.setenv("VCKATTN_EMULATION", "hw_emu")
    code = main(["run", "--bundle", str(minilm_bundle), "--manifest", "engine_small", "--backend", "xrt",
                 "--text", TEXT, "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "VCKATTN_EMULATION=hw_emu: the emulated card runs csim" in err and len(err.splitlines()) == 1
    monkeypatch.setenv("VCKATTN_EMULATION", "csim")
    from vckattn.host.backends.xrt import XrtDevice
    from vckattn.host.deploy import deploy

    small = load_manifest("engine_small")
    noengine = tmp_path / "noengine.json"  # every manifest is an engine build: one without is refused on load
    noengine.write_text(json.dumps({k: v for k, v in small.data.items() if k != "engine"}))
    with pytest.raises(ManifestError, match=r"'engine' is a required property"):
        XrtDevice(load_manifest(noengine)).open()
    with pytest.raises(UserError, match=r"unset VCKATTN_EMULATION for this command"):
        deploy(write_xclbin(tmp_path / "a.xclbin"), minilm_bundle)
