"""The ``pynq`` backend (host/backends/pynq.py) on a FAKE card behind a FAKE pynq module
(tests/fakes: they record calls; they are not hardware)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from fakes import fake_pynq
from fakes.card import FakeAttentionCard
from hw_jobs import emu_results, make_job, make_layer, manifest_edit, manifest_with_uuid, same_results, write_xclbin

from vckattn.golden.errors import ToolMissing
from vckattn.host.backends import device_class, hwio
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.pynq import PYNQ_MISSING, PynqDevice, arg_offsets, find_ip
from vckattn.host.tiler import TileError, collect_results

MANIFEST = manifest_with_uuid("vck190_attention", uuid=None)  # a .pdi/.hwh overlay has no xclbin UUID


def _setup(monkeypatch, tmp_path, per=3, timeout_ms=None, ip_keys=None, manifest=MANIFEST, **knobs):
    card = FakeAttentionCard(MANIFEST, **knobs)
    monkeypatch.setitem(sys.modules, "pynq", fake_pynq.module_for(card, ip_keys))
    dev = PynqDevice(manifest, write_xclbin(tmp_path / "attention.xclbin"), tiles_per_launch=per,
                     timeout_ms=timeout_ms, poll_s=0.0)
    return card, dev


def _run(dev, layer, job):
    with dev:
        dev.configure(layer)
        return list(dev.run(job))


@pytest.mark.parametrize("normalizer", ["swiftmax", "softmax"])
def test_bit_identical_to_emu(monkeypatch, tmp_path, normalizer):
    layer, job = make_layer(normalizer), make_job(MANIFEST)
    card, dev = _setup(monkeypatch, tmp_path)
    got = _run(dev, layer, job)
    assert same_results(got, emu_results(MANIFEST, layer, job))
    assert card.launches == 3 and device_class("pynq") is PynqDevice
    assert not any(e["op"].startswith("graph") for e in card.log)  # free-running graph: no graph control
    assert card.ops("overlay") == [{"op": "overlay", "path": str(tmp_path / "attention.xclbin"), "download": True}]


def test_mover_start_protocol(monkeypatch, tmp_path):
    """Arguments (64-bit addresses as low/high words) written before ap_start; CTRL polled to done."""
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    card, dev = _setup(monkeypatch, tmp_path)
    _run(dev, layer, job)
    regs = fake_pynq.hls_registers(MANIFEST.kernel("s2mm_out"))
    writes = [e for e in card.log if e["op"] == "mmio.write" and e["kernel"] == "s2mm_out"]
    names = ("desc_1", "desc_2", "out_1", "out_2", "n_tiles", "head_dim", "rq_mult", "rq_shift")
    first = writes[:len(names)]  # every argument, then CTRL
    assert [w["offset"] for w in first] == [regs[n]["address_offset"] for n in names]
    assert writes[len(names)] == {"op": "mmio.write", "kernel": "s2mm_out", "offset": 0, "value": 1}
    assert first[1]["value"] == 8 and first[3]["value"] == 8  # the fake's buffers live above 4 GiB: the high word
    assert first[4]["value"] == 3 and first[5]["value"] == 32 and first[6]["value"] == int(layer.rq_a.mult)
    # the three movers get the same desc buffer; mm2s_kv its geometry
    starts = {e["kernel"]: e["args"] for e in card.ops("start")[:4]}
    assert starts["s2mm_out"]["desc"] == starts["mm2s_kv"]["desc"] == starts["mm2s_tiles"]["desc"]
    assert {k: starts["mm2s_kv"][k] for k in ("n_tiles", "n_kv_heads", "head_dim", "keys_pad")} == {
        "n_tiles": 3, "n_kv_heads": 1, "head_dim": 32, "keys_pad": job.keys_pad}
    assert starts["score_switch"] == {"n_tiles": 3, "keys_pad": job.keys_pad, "select": 0}
    assert [e["kernel"] for e in card.ops("start")[:4]] == ["s2mm_out", "score_switch", "mm2s_kv", "mm2s_tiles"]
    polls = [e for e in card.log if e["op"] == "mmio.read" and e["offset"] == 0]
    assert {e["kernel"] for e in polls} == {"mm2s_tiles", "mm2s_kv", "s2mm_out", "score_switch"}


def test_wrong_switch_select_gives_wrong_results(monkeypatch, tmp_path):
    sm_layer, os_layer, job = make_layer("swiftmax"), make_layer("softmax"), make_job(MANIFEST)
    card, dev = _setup(monkeypatch, tmp_path)
    right = hwio.switch_select
    monkeypatch.setattr(hwio, "switch_select", lambda m, layer: 1 - right(m, layer))
    with dev:
        dev.configure(os_layer)
        dev.configure(sm_layer)  # swiftmax's registers written last ...
        got = list(dev.run(job))
    assert [e["normalizer"] for e in card.ops("computed")] == ["softmax"] * 3  # ... the switch decides
    assert not same_results(got, emu_results(MANIFEST, sm_layer, job))


def test_double_buffering_call_order(monkeypatch, tmp_path):
    layer, job = make_layer("softmax"), make_job(MANIFEST)
    card, dev = _setup(monkeypatch, tmp_path)
    _run(dev, layer, job)
    log = card.log
    starts = [i for i, e in enumerate(log) if e["op"] == "start" and e["kernel"] == "mm2s_tiles"]
    descs = [log[i]["args"]["desc"] for i in starts]
    assert len(starts) == 3 and descs[0] != descs[1] and descs[0] == descs[2]
    for c in range(len(starts) - 1):
        synced = [i for i in range(starts[c + 1]) if log[i]["op"] == "sync_to_device" and log[i]["buf"] == descs[c + 1]]
        first_poll = next(i for i in range(starts[c], len(log)) if log[i]["op"] == "mmio.read")
        assert starts[c] < synced[-1] < first_poll


def test_register_writes_and_readback(monkeypatch, tmp_path):
    layer = make_layer("softmax")
    card, dev = _setup(monkeypatch, tmp_path)
    with dev:
        dev.configure(layer)
        dev.verify_registers()
    off = {r["name"]: r["offset"] for r in MANIFEST.kernel("online_softmax")["registers"]}
    assert [(e["kernel"], e["offset"], e["value"]) for e in card.ops("reg.write")] == [
        ("online_softmax", off["a_mult"], layer.online.a_mult),
        ("online_softmax", off["a_shift"], layer.online.a_shift)]
    with dev:
        dev.configure(layer)
        card.stuck[("online_softmax", off["a_shift"])] = 0
        with pytest.raises(DeviceError, match=r"register readback mismatch: online_softmax\.a_shift at 0xc: wrote"):
            dev.verify_registers()


def test_errors(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynq", None)
    with pytest.raises(ToolMissing) as e:  # a missing runtime: exit status 6
        PynqDevice(MANIFEST, write_xclbin(tmp_path / "a.xclbin")).open()
    assert str(e.value) == PYNQ_MISSING and str(e.value).startswith("PYNQ not found")

    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    _, dev = _setup(monkeypatch, tmp_path, missing_kernels=("swiftmax",))
    with pytest.raises(DeviceError, match=r"the overlay lacks kernel\(s\) swiftmax listed in .*vck190_attention"):
        dev.open()
    _, dev = _setup(monkeypatch, tmp_path, ids={"swiftmax": 7})
    want = f"{MANIFEST.kernel('swiftmax')['id']:#010x}"
    with pytest.raises(DeviceError, match=rf"kernel swiftmax: ID register at 0x0 reads 0x00000007, expected {want}"):
        dev.open()
    _, dev = _setup(monkeypatch, tmp_path, timeout_ms=20, hang="mm2s_kv")
    with pytest.raises(DeviceError, match=r"device timeout after 20 ms in kernel mm2s_kv on launch 0 \(tiles 0\.\.2\)"):
        _run(dev, layer, job)
    _, dev = _setup(monkeypatch, tmp_path, status_tile=6)
    with pytest.raises(DeviceError, match="status 0x5 for tile 6"):
        _run(dev, layer, job)
    _, dev = _setup(monkeypatch, tmp_path, out_fault="reorder", fault_launch=1)
    with dev:
        dev.configure(layer)
        with pytest.raises(TileError, match=r"tile 3 .* out of order: tile 4 arrived before it"):
            collect_results(job, dev.run(job))
    _, dev = _setup(monkeypatch, tmp_path)
    dev.bitstream = tmp_path / "nope.pdi"
    with pytest.raises(DeviceError, match=r"nope\.pdi: bitstream file not found"):
        dev.open()

    def rename_port(data):
        k = next(k for k in data["kernels"] if k["name"] == "mm2s_kv")
        next(p for p in k["ports"] if p["name"] == "kv")["name"] = "kv_buffer"
    _, dev = _setup(monkeypatch, tmp_path, manifest=manifest_edit(MANIFEST, rename_port))
    with pytest.raises(DeviceError, match=r"kernel mm2s_kv \(mm2s_kv_1\): the overlay's register map has no "
                                          r"argument 'kv_buffer'"):
        dev.open()


def test_ip_names_and_register_naming():
    ip = {"mm2s_tiles_1": {}, "normalizers/swiftmax": {}, "online_softmax": {}}
    assert find_ip(ip, "mm2s_tiles") == "mm2s_tiles_1"
    assert find_ip(ip, "swiftmax") == "normalizers/swiftmax" and find_ip(ip, "online_softmax") == "online_softmax"
    assert find_ip(ip, "mm2s_kv") is None
    regs = {"out_r_1": {"address_offset": 0x10}, "out_r_2": {"address_offset": 0x14}, "n": {"address_offset": 0x1c},
            "q": {"address_offset": 0x24, "size": 64}}
    assert arg_offsets(regs, "out", True) == [0x10, 0x14]
    assert arg_offsets(regs, "n", False) == [0x1C] and arg_offsets(regs, "q", True) == [0x24, 0x28]
    with pytest.raises(KeyError):
        arg_offsets(regs, "mask", True)


def test_custom_ip_keys(monkeypatch, tmp_path):
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    _, dev = _setup(monkeypatch, tmp_path, ip_keys={"mm2s_kv": "movers/mm2s_kv"})
    with dev:
        assert {k.get("ip") for k in dev.kernels_checked if k["name"] == "mm2s_kv"} == {"movers/mm2s_kv"}
        dev.configure(layer)
        a = collect_results(job, dev.run(job))
    assert np.array_equal(a, collect_results(job, emu_results(MANIFEST, layer, job)))
