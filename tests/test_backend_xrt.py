"""The ``xrt`` backend (host/backends/xrt.py) on a FAKE card behind a FAKE pyxrt and, for the AIE graph and the
RTL kernels' registers, the project's real C++ shim and ctypes layer built against the STUB XRT library
(tests/fakes: they record calls; they are not hardware). The shim itself: tests/test_xrt_shim.py."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import numpy as np
import pytest
from fakes import fake_pyxrt
from fakes.card import FakeAttentionCard
from fakes.xrt_stub import card_handler
from hw_jobs import (
    OTHER_UUID,
    emu_results,
    make_job,
    make_layer,
    manifest_edit,
    manifest_with_uuid,
    same_results,
    write_xclbin,
)

from vckattn.golden.errors import ToolMissing
from vckattn.host.backends import device_class, hwio, xrt_graph
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.hwio import register_writes
from vckattn.host.backends.xrt import XRT_MISSING, XrtDevice
from vckattn.host.tiler import TileError, collect_results

MANIFEST = manifest_with_uuid()


@pytest.fixture
def setup(monkeypatch, tmp_path, xrt_stub):
    """``setup(**knobs) -> (card, device)``: a fake card behind the fake pyxrt and, through the real shim and ctypes
    layer, the stub XRT library."""
    def make(manifest=MANIFEST, card_manifest=None, per=3, timeout_ms=None, **knobs):
        card = FakeAttentionCard(card_manifest or manifest, **knobs)
        monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(card))
        xrt_stub.set_handler(card_handler(card))
        dev = XrtDevice(manifest, write_xclbin(tmp_path / "attention.xclbin"), tiles_per_launch=per,
                        timeout_ms=timeout_ms)
        return card, dev
    return make


def _run(dev, layer, job):
    with dev:
        dev.configure(layer)
        return list(dev.run(job))


@pytest.mark.parametrize("normalizer", ["swiftmax", "softmax"])
def test_bit_identical_to_emu(setup, monkeypatch, tmp_path, normalizer):
    layer, job = make_layer(normalizer), make_job(MANIFEST)
    card, dev = setup()
    got = _run(dev, layer, job)
    assert same_results(got, emu_results(MANIFEST, layer, job))
    assert card.launches == 3 and dev.launches == 3  # 8 tiles in launches of 3, 3, 2
    assert [e["normalizer"] for e in card.ops("computed")] == [normalizer] * 3
    assert device_class("xrt") is XrtDevice and dev.where.startswith("hardware")


def test_open_checks_and_ids(setup, monkeypatch, tmp_path):
    card, dev = setup()
    with dev:
        assert dev.uuid == MANIFEST.uuid
        assert {k["name"] for k in dev.kernels_checked} == {*MANIFEST.kernel_names, "attention_graph"}
    first = [e["op"] for e in card.log[:3]]
    assert first == ["device", "xclbin", "load_xclbin"]  # checked before loading
    id_reads = [e for e in card.ops("reg.read") if e["offset"] == 0]
    assert {e["kernel"] for e in id_reads} == {"swiftmax", "online_softmax"}
    assert card.ops("graph.open")[0]["name"] == "attention_graph"


def test_register_writes_land_at_manifest_offsets(setup, monkeypatch, tmp_path):
    layer = make_layer("swiftmax")
    card, dev = setup()
    with dev:
        dev.configure(layer)
        read = dev.verify_registers()
    table = {r["name"]: r for r in MANIFEST.kernel("swiftmax")["registers"]}
    depth = int(table["b_beta"]["depth"])
    regs = layer.swiftmax.register_values(replace(layer.sm_fmt, max_heads=depth))  # shared ints, per-head lists
    want = {(int(table[n]["offset"]) + 4 * i, e & 0xFFFFFFFF)
            for n, v in regs.items() for i, e in enumerate(v if isinstance(v, list) else [v])}
    scalars = [r for r in table.values() if r["access"] == "rw" and r["kind"] == "reg"]
    assert len(want) == len(scalars) + 2 * depth  # every shared register, every entry of b_beta and c_out
    writes = {(e["offset"], e["value"]) for e in card.ops("reg.write")}
    assert writes == want and all(e["kernel"] == "swiftmax" for e in card.ops("reg.write"))
    assert regs["u_lo"] < 0 and (int(table["u_lo"]["offset"]), regs["u_lo"] + (1 << 32)) in writes  # two's complement
    assert read["u_lo"] == regs["u_lo"] & 0xFFFFFFFF
    starts = card.ops("start")
    assert {e["kernel"] for e in starts} == set()  # configure only: nothing ran


def test_wrong_register_offset_gives_wrong_results(setup, monkeypatch, tmp_path):
    """The fake card decodes registers at the manifest offsets: a host writing u_lo and u_hi at
    each other's offsets gets results that differ from the golden model."""
    def swap(data):
        regs = next(k for k in data["kernels"] if k["name"] == "swiftmax")["registers"]
        a, s = (next(r for r in regs if r["name"] == n) for n in ("u_lo", "u_hi"))
        a["offset"], s["offset"] = s["offset"], a["offset"]
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    _, dev = setup(manifest=manifest_edit(MANIFEST, swap), card_manifest=MANIFEST)
    got = _run(dev, layer, job)
    assert [r.tile_id for r in got] == list(range(8))
    assert not same_results(got, emu_results(MANIFEST, layer, job))


def test_wrong_switch_select_gives_wrong_results(setup, monkeypatch, tmp_path):
    """The fake card normalizes with the kernel score_switch's select routes to, not with whichever
    registers were written last: a host passing the other select gets results that differ from emu."""
    sm_layer, os_layer, job = make_layer("swiftmax"), make_layer("softmax"), make_job(MANIFEST)
    card, dev = setup()
    right = hwio.switch_select
    monkeypatch.setattr(hwio, "switch_select", lambda m, layer: 1 - right(m, layer))
    with dev:
        dev.configure(os_layer)  # both register files hold valid constants; swiftmax's written last
        dev.configure(sm_layer)
        got = list(dev.run(job))
    assert {e["args"]["select"] for e in card.ops("start") if e["kernel"] == "score_switch"} == {1}
    assert [e["normalizer"] for e in card.ops("computed")] == ["softmax"] * 3
    assert [r.tile_id for r in got] == list(range(8))
    assert not same_results(got, emu_results(MANIFEST, sm_layer, job))


@pytest.mark.parametrize(("head_dim", "heads", "kv_heads"), [(64, 4, 2), (32, 4, 4)])
def test_geometry_comes_from_the_kernel_arguments(setup, monkeypatch, tmp_path, head_dim, heads, kv_heads):
    layer = make_layer("swiftmax", heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    job = make_job(MANIFEST, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    card, dev = setup(per=5)
    got = _run(dev, layer, job)
    assert same_results(got, emu_results(MANIFEST, layer, job))
    geom = {"head_dim": head_dim, "keys_pad": job.keys_pad, "n_kv_heads": kv_heads}
    assert all(e["geometry"] == geom for e in card.ops("computed"))
    starts = [e for e in card.ops("start") if e["kernel"] in ("mm2s_tiles", "mm2s_kv", "s2mm_out")]
    assert all(e["args"]["head_dim"] == head_dim for e in starts)
    # desc is allocated once, in mm2s_tiles' group, and shared by the three movers
    first = {e["kernel"]: e["args"] for e in card.ops("start")[:4]}
    assert first["mm2s_tiles"]["desc"] == first["mm2s_kv"]["desc"] == first["s2mm_out"]["desc"]


def test_fake_checks_shared_buffer_groups(monkeypatch, tmp_path):
    """A buffer shared by several kernels is accepted in the group of any of its users, and only there."""
    card = FakeAttentionCard(MANIFEST)
    pyxrt = fake_pyxrt.module_for(card)
    dev = pyxrt.device(0)
    xuuid = dev.load_xclbin(pyxrt.xclbin(str(write_xclbin(tmp_path / "a.xclbin"))))
    tiles, kv = pyxrt.kernel(dev, xuuid, "mm2s_tiles"), pyxrt.kernel(dev, xuuid, "mm2s_kv")
    desc = pyxrt.bo(dev, 64, pyxrt.bo.flags.normal, tiles.group_id(0))  # mm2s_tiles.desc
    q = pyxrt.bo(dev, 64, pyxrt.bo.flags.normal, tiles.group_id(1))  # mm2s_tiles.q
    kvb = pyxrt.bo(dev, 64, pyxrt.bo.flags.normal, kv.group_id(1))
    with pytest.raises(ValueError, match=r"bo for mm2s_kv\.desc was allocated in group 1, .*mm2s_tiles\.desc"):
        kv(q, kvb, 1, 1, 32, 32, None, None)
    kv(desc, kvb, 1, 1, 32, 32, None, None)  # desc from mm2s_tiles' group: one of its users
    assert card.ops("start")[-1]["kernel"] == "mm2s_kv"


def test_double_buffering_call_order(setup, xrt_stub):
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    card, dev = setup()
    _run(dev, layer, job)
    log = card.log
    starts = [i for i, e in enumerate(log) if e["op"] == "start" and e["kernel"] == "mm2s_tiles"]
    assert len(starts) == 3
    descs = [log[i]["args"]["desc"] for i in starts]
    outs = [e["args"]["out"] for e in card.ops("start") if e["kernel"] == "s2mm_out"]
    assert descs[0] != descs[1] and descs[0] == descs[2] and outs[0] != outs[1] and outs[0] == outs[2]  # ping/pong
    for c in range(len(starts) - 1):
        nxt = descs[c + 1]
        synced = [i for i in range(starts[c + 1]) if log[i]["op"] == "bo.sync" and log[i]["bo"] == nxt
                  and log[i]["dir"] == "to_device"]
        first_wait = next(i for i in range(starts[c], len(log)) if log[i]["op"] == "wait")
        assert starts[c] < synced[-1] < first_wait, f"launch {c + 1} not packed before launch {c} was waited on"
        # the graph runs one launch at a time: launch c is waited on before c+1 is started
        assert first_wait < starts[c + 1]
    runs = [e["iterations"] for e in card.ops("graph.run")]
    assert runs == [3, 3, 2] and len(card.ops("graph.wait")) == 3
    # ... as XRT saw them, through the shim: run(n), wait(the device's time-out in ms), end and release at close
    graph_calls = [(op, a) for op, name, a, _ in xrt_stub.calls() if op.startswith("graph.")]
    assert graph_calls == [("graph.open", 0), ("graph.run", 3), ("graph.wait", dev.timeout_ms), ("graph.run", 3),
                           ("graph.wait", dev.timeout_ms), ("graph.run", 2), ("graph.wait", dev.timeout_ms),
                           ("graph.end", 0), ("graph.close", 0)]
    kv_syncs = [e for e in card.ops("bo.sync") if e["dir"] == "to_device" and e["bo"] in
                {s["args"]["kv"] for s in card.ops("start") if s["kernel"] == "mm2s_kv"}]
    assert len(kv_syncs) == 1  # K/V uploaded once per job
    outs_back = [e for e in card.ops("bo.sync") if e["dir"] == "from_device"]
    assert len(outs_back) == 3


@pytest.mark.parametrize(("knobs", "message"), [
    ({"hang": "s2mm_out"}, r"device timeout after 40 ms in kernel s2mm_out on launch 0 \(tiles 0\.\.2\)"),
    ({"hang": "mm2s_tiles"}, r"device timeout after 40 ms in kernel mm2s_tiles on launch 0 \(tiles 0\.\.2\)"),
    ({"hang": "attention_graph"}, r"device timeout after 40 ms in kernel attention_graph on launch 0"),
    ({"fail": {"mm2s_kv": "ERT_CMD_STATE_ERROR"}},
     r"device error in kernel mm2s_kv on launch 0 \(tiles 0\.\.2\): run state ERT_CMD_STATE_ERROR"),
    ({"status_tile": 4}, r"the device reported status 0x5 for tile 4 \(out record 1\)"),
])
def test_run_errors(setup, monkeypatch, tmp_path, knobs, message):
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    _, dev = setup(timeout_ms=40, **knobs)
    with pytest.raises(DeviceError, match=message):
        _run(dev, layer, job)


@pytest.mark.parametrize(("op", "when", "message"), [
    ("ip.open", "open", r"^cannot open kernel 'swiftmax' for register access: PCIe link down$"),
    ("graph.open", "open", r"^cannot open AIE graph 'attention_graph': PCIe link down$"),
    ("ip.write", "configure", r"^kernel swiftmax: register write at 0x8 failed: PCIe link down$"),
    ("ip.read", "open", r"^kernel swiftmax: register read at 0x0 failed: PCIe link down$"),
    ("graph.run", "run", r"^AIE graph attention_graph: run\(3\) failed: PCIe link down$"),
    ("graph.wait", "run", r"^AIE graph attention_graph: wait failed: PCIe link down$"),
])
def test_failing_xrt_calls_are_device_errors(setup, xrt_stub, op, when, message):
    """Each XRT call the shim makes, failing, stops the backend with one line (exit status 7) and releases the card."""
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    card, dev = setup()
    xrt_stub.fail(op, "PCIe link down")
    with pytest.raises(DeviceError, match=message) as e:
        dev.open()
        assert when != "open"
        dev.configure(layer)
        assert when != "configure"
        list(dev.run(job))
    assert e.value.exit_code == 7
    dev.close()
    assert dev._graph is None and dev._ips == {}
    ops = xrt_stub.ops()
    assert ops.count("ip.close") == ops.count("ip.open") - (op == "ip.open")  # every handle opened was released
    assert ops.count("graph.close") == ops.count("graph.open") - (op == "graph.open")


@pytest.mark.parametrize(("fault", "message"), [
    ("drop", r"tile 1 \(sequence 0, head 0, query rows 32\.\.44\) missing: tile 2 arrived in its place"),
    ("duplicate", r"tile 0 \(sequence 0, head 0, query rows 0\.\.31\) returned twice"),
    ("reorder", r"tile 0 \(sequence 0, head 0, query rows 0\.\.31\) out of order: tile 1 arrived before it"),
])
def test_out_buffer_faults_reach_the_tile_checker(setup, monkeypatch, tmp_path, fault, message):
    layer, job = make_layer("swiftmax"), make_job(MANIFEST)
    card, dev = setup(out_fault=fault)
    with dev:
        dev.configure(layer)
        with pytest.raises(TileError, match=message):
            collect_results(job, dev.run(job))
    waited = [e["kernel"] for e in card.ops("wait")]
    assert card.launches == 3 and waited.count("s2mm_out") == 3  # the stream was drained, every launch waited on


def test_clean_run_assembles(setup, monkeypatch, tmp_path):
    layer, job = make_layer("softmax"), make_job(MANIFEST)
    _, dev = setup(per=16)
    with dev:
        dev.configure(layer)
        a = collect_results(job, dev.run(job))
    ref = collect_results(job, emu_results(MANIFEST, layer, job))
    assert np.array_equal(a, ref)


def test_open_errors(setup, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyxrt", None)
    with pytest.raises(ToolMissing) as e:  # a missing runtime: exit status 6
        XrtDevice(MANIFEST, write_xclbin(tmp_path / "a.xclbin")).open()
    assert str(e.value) == XRT_MISSING
    assert "source /opt/xilinx/xrt/setup.sh" in XRT_MISSING

    cases = [
        ({}, {"device_index": 1}, r"^no card at index 1: Could not open device with index '1'$"),
        ({"unreadable_xclbin": True}, {}, r"attention\.xclbin: cannot read the xclbin: Invalid xclbin: bad magic"),
        ({"xclbin_uuid": OTHER_UUID}, {},
         rf"xclbin UUID {OTHER_UUID} does not match .*vck5000_attention\.json \({MANIFEST.uuid}\)"),
        ({"missing_kernels": ("online_softmax", "mm2s_kv")}, {},
         r"the xclbin lacks kernel\(s\) mm2s_kv, online_softmax listed in"),
        ({"ids": {"online_softmax": 0xDEADBEEF}}, {},
         rf"kernel online_softmax: ID register at 0x0 reads 0xdeadbeef, expected "
         rf"{MANIFEST.kernel('online_softmax')['id']:#010x} \(.*\): the bitstream holds a different kernel"),
    ]
    for knobs, opts, message in cases:
        card, dev = setup(**knobs)
        for k, v in opts.items():
            setattr(dev, k, v)
        with pytest.raises(DeviceError, match=message):
            dev.open()
        assert dev._dev is None and dev._graph is None  # released on failure

    _, dev = setup()
    dev.xclbin = tmp_path / "missing.xclbin"
    with pytest.raises(DeviceError, match=r"missing\.xclbin: xclbin file not found"):
        dev.open()
    _, dev = setup(manifest=manifest_with_uuid(uuid=None))
    with pytest.raises(DeviceError, match=r"xclbin\.uuid: the manifest records no built xclbin"):
        dev.open()


def test_configure_refusals(setup, monkeypatch, tmp_path):
    layer = make_layer("swiftmax")
    def drop_reg(data):
        regs = next(k for k in data["kernels"] if k["name"] == "swiftmax")["registers"]
        regs[:] = [r for r in regs if r["name"] != "c_out"]
    with pytest.raises(DeviceError, match=r"no writable register for c_out"):
        register_writes(manifest_edit(MANIFEST, drop_reg), layer)
    _, dev = setup()
    with dev, pytest.raises(RuntimeError, match="configure"):
        list(dev.run(make_job(MANIFEST)))


# ------------------------------------------------------------------------------------ C++ shim


def test_shim_missing_xrt(monkeypatch, tmp_path):
    monkeypatch.delenv("XILINX_XRT", raising=False)
    with pytest.raises(ToolMissing, match=r"XILINX_XRT is not set \(install XRT 2022\.2"):  # a missing runtime: 6
        xrt_graph.load_shim()
    monkeypatch.setenv("XILINX_XRT", str(tmp_path))
    with pytest.raises(ToolMissing) as e:
        xrt_graph.load_shim()
    msg = str(e.value)
    assert "include/xrt/xrt_device.h" in msg and "experimental/xrt_graph.h" in msg and "libxrt_coreutil.so" in msg
    assert "\n" not in msg
    # the backend without factories needs the shim: the same one-line error, after pyxrt opened the card
    card = FakeAttentionCard(MANIFEST)
    monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(card))
    dev = XrtDevice(MANIFEST, write_xclbin(tmp_path / "a.xclbin"))
    with pytest.raises(ToolMissing, match="XRT graph shim: XILINX_XRT="):
        dev.open()
    assert os.environ["XILINX_XRT"] == str(tmp_path)
    assert ToolMissing("x").exit_code == 6


def test_fake_card_per_head_swiftmax_memories():
    """The fake card decodes register map v2: b_beta / c_out memory entries written at the map's offsets
    (RegisterMap.writes, entry i named ``b_beta[i]``) become one register set per head, and a tile uses
    its descriptor's head's set."""
    from types import SimpleNamespace

    from hw_jobs import manifest_edit

    from vckattn.golden.swiftmax_int import SwiftMaxHeads, swiftmax_head_registers, swiftmax_regmap
    from vckattn.host.tiler import Tile

    rm = swiftmax_regmap()

    def v2(data):  # the swiftmax kernel's registers as the v2 map describes them (memories with their depth)
        k = next(k for k in data["kernels"] if k["name"] == "swiftmax")
        k["registers"] = rm.describe()

    card = FakeAttentionCard(manifest_edit(MANIFEST, v2))
    heads = swiftmax_head_registers(0.05, 0.045, 32, [0.0, 1.5, -2.0], [1.0, 4.0, 0.25], 7)
    writes = rm.writes(heads.register_values())
    assert {w.name for w in writes} >= {"b_beta[0]", "b_beta[31]", "c_out[2]"}
    for w in writes:
        card.reg_write("swiftmax", w.offset, w.word)
    for w in writes:  # read back exactly, memory entries included
        assert rm.value(w.name.split("[")[0], card.reg_read("swiftmax", w.offset)) == w.value
    got = card._swiftmax("swiftmax")
    assert isinstance(got, SwiftMaxHeads) and got.n_heads == rm.mem("b_beta").depth
    for h in range(3):
        assert (got[h].b_beta, got[h].c_out, got[h].a_mult) == (heads[h].b_beta, heads[h].c_out, heads[h].a_mult)
    assert got[3].b_beta == 0 and got[31].c_out == 0  # entries past the layer's heads are written 0
    layer = SimpleNamespace(swiftmax=got)
    tile = Tile(5, 0, 2, 0, 0, 32, np.zeros((32, 32), np.int8), np.ones((32, 32), bool))
    assert FakeAttentionCard._tile_layer(layer, tile).swiftmax == got[2]
