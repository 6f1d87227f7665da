"""The ``pynq`` backend (host/backends/pynq.py) on the small generated instance, on the FAKE
engine card (tests/fakes/engine_card.py) behind the FAKE pynq module (tests/fakes/fake_pynq.py: one IP per mover
compute unit, ``ap_ctrl_hs`` control registers, a free-running AIE graph). They record calls; none of this is
hardware. The backend's results must equal the emu backend's bit for bit."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from fakes import fake_pynq
from fakes.engine_card import FakeEngineCard
from hw_jobs import manifest_edit, manifest_with_uuid, write_xclbin

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.errors import ToolMissing
from vckattn.golden.quant_attention import calibrate_attention, narrow_layer
from vckattn.golden.stages import attention_int
from vckattn.host.attention_layer import run_layer
from vckattn.host.backends import device_class
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.pynq import PYNQ_MISSING, PynqDevice, arg_offsets, find_ip

MANIFEST = manifest_with_uuid("engine_small", None)  # a .pdi/.hwh overlay has no xclbin UUID


def _layer(batch=3, heads=4, seq=45, causal=False, seed=0):
    torch.manual_seed(seed)
    mha = MultiHeadAttention(32 * heads, heads).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, 32 * heads))
    keep = np.ones((batch, seq), bool)
    keep[-1, seq * 2 // 3:] = False
    return narrow_layer(calibrate_attention(mha, x, keep, "swiftmax", causal=causal, beta=3.0, gamma=5.0), 8), x, keep


@pytest.fixture
def setup(monkeypatch, tmp_path):
    def make(manifest=MANIFEST, card_manifest=None, timeout_ms=None, ip_keys=None, **knobs):
        card = FakeEngineCard(card_manifest or manifest, **knobs)
        monkeypatch.setitem(sys.modules, "pynq", fake_pynq.module_for(card, ip_keys))
        dev = device_class("pynq")(manifest, xclbin=write_xclbin(tmp_path / "engine_small.xclbin"),
                                      timeout_ms=timeout_ms, poll_s=0.0)
        return card, dev
    return make


@pytest.mark.parametrize(("batch", "heads", "causal"), [(3, 4, False), (1, 3, True)])
def test_bit_identical_to_emu(setup, batch, heads, causal):
    layer, x, keep = _layer(batch, heads, causal=causal, seed=batch + heads)
    card, dev = setup()
    with dev:
        assert isinstance(dev, PynqDevice) and dev.where.startswith("hardware")
        got = run_layer(dev, layer, x, keep)
        dev.verify_registers()
    with device_class("emu")(MANIFEST) as emu:
        ref = run_layer(emu, layer, x, keep)
    assert np.array_equal(got.out, ref.out) and np.array_equal(got.y, ref.y)
    assert np.array_equal(got.out, attention_int(layer, x, keep)[0])
    t = -(-45 // 16)
    own = [len(range(i, batch * heads, 2)) * t for i in range(2)]
    assert [e["tiles"] for e in card.ops("computed")] == own  # free-running graph: no filler tiles
    assert not any(e["op"].startswith("graph") for e in card.log)


def test_mover_start_protocol(setup):
    layer, x, keep = _layer(1, 3)
    card, dev = setup()
    with dev:
        run_layer(dev, layer, x, keep)
    regs = fake_pynq.hls_registers(MANIFEST.kernel("s2mm_engine"))
    writes = [e for e in card.log if e["op"] == "mmio.write" and e["kernel"] == "s2mm_engine_1"]
    names = ("a_out_1", "a_out_2", "done_1", "done_2", "n_records", "n_slots", "pipeline")
    assert [w["offset"] for w in writes[:len(names)]] == [regs[n]["address_offset"] for n in names]
    assert [w["value"] for w in writes[4:7]] == [3, 9, 1]  # pipeline 1's 3 own tiles, 9 slots, its index
    assert writes[len(names)] == {"op": "mmio.write", "kernel": "s2mm_engine_1", "offset": 0, "value": 1}
    started = [e["kernel"] for e in card.log if e["op"] == "mmio.write" and e["offset"] == 0 and e["value"] == 1]
    assert started == ["s2mm_engine_0", "s2mm_engine_1", "mm2s_engine_k_0", "mm2s_engine_k_1", "mm2s_engine_v_0",
                       "mm2s_engine_v_1", "mm2s_engine_q_0", "mm2s_engine_q_1"]


@pytest.mark.parametrize(("knobs", "message"), [
    ({"hang": "s2mm_engine_0"}, r"^device timeout after 30 ms in s2mm_engine_0 on launch 0$"),
    ({"done_fault": "misroute"}, r"^pynq launch 0: pipeline 1: tile \d+ .* written by pipeline 0 .*\(misrouted\)$"),
    ({"done_fault": "stale"}, r"^pynq launch 0: pipeline 0: s2mm_engine_0 wrote 0 of 18 done records"),
])
def test_run_errors(setup, knobs, message):
    layer, x, keep = _layer()
    _, dev = setup(timeout_ms=30, **knobs)
    with pytest.raises(DeviceError, match=message) as e, dev:
        run_layer(dev, layer, x, keep)
    assert e.value.exit_code == 7


def test_open_errors(setup, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(ToolMissing) as e:
        PynqDevice(MANIFEST, xclbin=write_xclbin(tmp_path / "a.xclbin")).open()
    assert str(e.value) == PYNQ_MISSING and e.value.exit_code == 6
    _, dev = setup(missing_kernels=("s2mm_engine",))
    with pytest.raises(DeviceError, match=r"the overlay lacks s2mm_engine_0, s2mm_engine_1 listed in"):
        dev.open()
    _, dev = setup(ids={"engine_pl": 7})
    with pytest.raises(DeviceError, match=r"kernel engine_pl: ID register at 0x0 reads 0x00000007, expected"):
        dev.open()
    assert dev._overlay is None
    _, dev = setup()
    dev.xclbin = tmp_path / "none.pdi"
    with pytest.raises(DeviceError, match=r"none\.pdi: bitstream file not found"):
        dev.open()


def test_wrong_register_offset_gives_wrong_results(setup):
    """The fake card reads SwiftMax's constants at the manifest's offsets (so the bit-exact test above could fail)."""
    def swap(data):
        regs = next(k for k in data["kernels"] if k["name"] == "engine_pl")["registers"]
        a, s = (next(r for r in regs if r["name"] == n) for n in ("u_lo", "u_hi"))
        a["offset"], s["offset"] = s["offset"], a["offset"]
    layer, x, keep = _layer()
    _, dev = setup(manifest=manifest_edit(MANIFEST, swap), card_manifest=MANIFEST)
    with dev:
        got = run_layer(dev, layer, x, keep)
    with device_class("emu")(MANIFEST) as emu:
        assert not np.array_equal(got.out, run_layer(emu, layer, x, keep).out)


def test_register_readback_mismatch(setup):
    """A register that does not hold what was written is a device fault, named with its offset."""
    layer, x, keep = _layer()
    card, dev = setup()
    off = {r["name"]: int(r["offset"]) for r in MANIFEST.kernel("engine_pl")["registers"]}
    with dev:
        dev.configure(layer)
        assert {(e["offset"], e["value"]) for e in card.ops("reg.write")} == \
            {(w.offset, w.word) for w in dev.written}
        card.stuck[("engine_pl", off["u_hi"])] = 0
        with pytest.raises(DeviceError, match=rf"register readback mismatch: engine_pl\.u_hi at {off['u_hi']:#x}: "
                                              "wrote") as e:
            dev.verify_registers()
    assert e.value.exit_code == 7


def test_ip_names_and_register_naming():
    ip = {"mm2s_engine_q_0": {}, "movers/mm2s_engine_k_0": {}, "normalizers/engine_pl": {}, "s2mm_engine_1": {}}
    assert find_ip(ip, "mm2s_engine_q_0") == "mm2s_engine_q_0"
    assert find_ip(ip, "mm2s_engine_k_0") == "movers/mm2s_engine_k_0" and find_ip(ip, "engine_pl") == \
        "normalizers/engine_pl"
    assert find_ip(ip, "s2mm_engine") == "s2mm_engine_1"  # Vitis' default compute-unit name of a kernel
    assert find_ip(ip, "mm2s_engine_v_0") is None
    regs = {"out_r_1": {"address_offset": 0x10}, "out_r_2": {"address_offset": 0x14}, "n": {"address_offset": 0x1c},
            "q": {"address_offset": 0x24, "size": 64}}
    assert arg_offsets(regs, "out", True) == [0x10, 0x14]
    assert arg_offsets(regs, "n", False) == [0x1C] and arg_offsets(regs, "q", True) == [0x24, 0x28]
    with pytest.raises(KeyError):
        arg_offsets(regs, "mask", True)


def test_custom_ip_keys_and_a_missing_argument(setup):
    """Units found in a hierarchy run bit-exact; a mover whose register map lacks an argument is refused by name."""
    layer, x, keep = _layer(1, 3)
    _, dev = setup(ip_keys={"mm2s_engine_k_1": "movers/mm2s_engine_k_1"})
    with dev:
        assert {k.get("ip") for k in dev.kernels_checked if k["name"] == "mm2s_engine_k_1"} == \
            {"movers/mm2s_engine_k_1"}
        got = run_layer(dev, layer, x, keep)
    assert np.array_equal(got.out, attention_int(layer, x, keep)[0])

    def rename_port(data):
        k = next(k for k in data["kernels"] if k["name"] == "s2mm_engine")
        next(p for p in k["ports"] if p["name"] == "done")["name"] = "done_log"
    _, dev = setup(manifest=manifest_edit(MANIFEST, rename_port), card_manifest=MANIFEST)
    with pytest.raises(DeviceError, match=r"kernel s2mm_engine \(s2mm_engine_0\): the overlay's register map has no "
                                          r"argument 'done_log'"):
        dev.open()
