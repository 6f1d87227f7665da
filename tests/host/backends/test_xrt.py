"""The ``xrt`` backend (host/backends/xrt.py) on the small generated instance (2 pipelines x
2 QKᵀ/P·V kernels, one score channel of 2 SwiftMax lanes, int8 scores), on a FAKE engine card (tests/fakes/
engine_card.py: the movers read the device-side buffers as hw/hls/mm2s_engine.cpp does, the array and the PL top are
the engine's bit-exact functional model on the registers the host wrote) behind the FAKE pyxrt and, for ``engine_pl``'s
registers and the AIE graph, the real C++ shim on the STUB XRT library. They record calls; none of this is hardware.
The backend's results must equal the emu backend's bit for bit."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
import torch
from fakes import fake_pyxrt
from fakes.engine_card import FakeEngineCard
from fakes.xrt_stub import card_handler
from hw_jobs import OTHER_UUID, manifest_edit, manifest_with_uuid, write_xclbin

from vckattn.golden.attention import MultiHeadAttention
from vckattn.golden.errors import ToolMissing
from vckattn.golden.quant_attention import calibrate_attention, narrow_layer
from vckattn.golden.stages import attention_int
from vckattn.host.attention_layer import run_layer
from vckattn.host.backends import device_class, xrt_graph
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.engine_hw import balanced_lists, pipelines_of
from vckattn.host.backends.hwio import register_writes
from vckattn.host.backends.xrt import XrtDevice
from vckattn.host.engine import plan_launch

MANIFEST = manifest_with_uuid("engine_small")


def _layer(batch=3, heads=4, seq=45, causal=False, seed=0, kv_heads=None, head_dim=32, per_head=False):
    """A narrow SwiftMax layer; ``per_head``: every head its own β/γ (the b_beta / c_out memories' entries)."""
    torch.manual_seed(seed)
    mha = MultiHeadAttention(head_dim * heads, heads, kv_heads or heads, head_dim).double()
    x = np.random.default_rng(seed).normal(size=(batch, seq, head_dim * heads))
    keep = np.ones((batch, seq), bool)
    keep[-1, seq * 2 // 3:] = False
    beta, gamma = ((np.linspace(1.0, 4.0, heads), np.geomspace(3.0, 9.0, heads)) if per_head else (3.0, 5.0))
    layer = calibrate_attention(mha, x, keep, "swiftmax", causal=causal, beta=beta, gamma=gamma)
    return narrow_layer(layer, 8), x, keep


@pytest.fixture
def setup(monkeypatch, tmp_path, xrt_stub):
    """``setup(**knobs) -> (card, device)``: a fake engine card behind the fake pyxrt and the stub XRT library."""
    def make(manifest=MANIFEST, card_manifest=None, timeout_ms=None, **knobs):
        card = FakeEngineCard(card_manifest or manifest, **knobs)
        monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(card))
        xrt_stub.set_handler(card_handler(card))
        dev = device_class("xrt")(manifest, xclbin=write_xclbin(tmp_path / "engine_small.xclbin"),
                                     timeout_ms=timeout_ms)
        return card, dev
    return make


def _emu(layer, x, keep):
    with device_class("emu")(MANIFEST) as dev:
        return run_layer(dev, layer, x, keep)


@pytest.mark.parametrize(("batch", "heads", "causal"), [(3, 4, False), (1, 3, True), (1, 1, False)])
def test_bit_identical_to_emu(setup, xrt_stub, batch, heads, causal):
    """Equal pipelines (12 groups on 2), and unequal ones (3 groups, 1 group: the short pipeline re-runs pipeline 0's
    group so the graph's one iteration count fits both)."""
    layer, x, keep = _layer(batch, heads, causal=causal, seed=batch + heads)
    want, trace = attention_int(layer, x, keep)
    card, dev = setup()
    with dev:
        assert isinstance(dev, XrtDevice) and dev.where.startswith("hardware")
        got = run_layer(dev, layer, x, keep)
    ref = _emu(layer, x, keep)
    assert np.array_equal(got.out, ref.out) and np.array_equal(got.y, ref.y)
    assert np.array_equal(got.out, want) and np.array_equal(got.y, trace["y"])  # and golden's layer
    t = -(-45 // 16)
    per_pipe = [len(range(i, batch * heads, 2)) * t for i in range(2)]
    n = max(per_pipe)
    assert [e["tiles"] for e in card.ops("computed")] == [n, n]  # every pipeline ran the graph's count
    assert [c[2] for c in xrt_stub.calls("graph.run")] == [n]
    assert [c[2] for c in xrt_stub.calls("graph.wait")] == [dev.timeout_ms]
    assert device_class("xrt") is XrtDevice


@pytest.mark.parametrize(("heads", "kv_heads", "head_dim", "per_head"), [(4, 2, 64, False), (4, 1, 32, True),
                                                                         (2, 2, 64, True)])
def test_geometry_and_per_head_constants_bit_identical(setup, heads, kv_heads, head_dim, per_head):
    """Grouped K/V heads, the build's full head size and a smaller one, per-head SwiftMax constants (each head reads
    its own b_beta / c_out entries on the card): equal to emu and to golden's layer."""
    layer, x, keep = _layer(2, heads, kv_heads=kv_heads, head_dim=head_dim, per_head=per_head, seed=heads + head_dim)
    if per_head:
        assert len({h.b_beta for h in layer.swiftmax.heads}) == heads  # distinct register sets
    card, dev = setup()
    with dev:
        got = run_layer(dev, layer, x, keep)
    assert np.array_equal(got.out, _emu(layer, x, keep).out)
    assert np.array_equal(got.y, attention_int(layer, x, keep)[1]["y"])


def test_open_checks_ids_and_units(setup, xrt_stub):
    card, dev = setup()
    with dev:
        assert dev.uuid == MANIFEST.uuid
        units = {k["name"] for k in dev.kernels_checked}
    assert units == {f"mm2s_engine_{r}_{i}" for r in ("q", "k", "v") for i in (0, 1)} | \
        {"s2mm_engine_0", "s2mm_engine_1", "engine_pl", "engine_graph"}
    assert [e["op"] for e in card.log[:3]] == ["device", "xclbin", "load_xclbin"]  # checked before loading
    opened = {e["name"] for e in card.ops("kernel")}
    assert opened == {f"mm2s_engine:{{mm2s_engine_{r}_{i}}}" for r in ("q", "k", "v") for i in (0, 1)} | \
        {"s2mm_engine:{s2mm_engine_0}", "s2mm_engine:{s2mm_engine_1}"}
    assert ("ip.read", "engine_pl", 0, 0) in xrt_stub.calls()  # the ID register, through the shim
    assert xrt_stub.ops()[-2:] == ["graph.close", "ip.close"]  # released at close (no run: no end)
    assert [p.q for p in pipelines_of(MANIFEST, 2)] == ["mm2s_engine_q_0", "mm2s_engine_q_1"]


def test_registers_written_and_read_back(setup, xrt_stub):
    layer, x, keep = _layer()
    card, dev = setup()
    with dev:
        dev.configure(layer)
        read = dev.verify_registers()
    writes = [(c[2], c[3]) for c in xrt_stub.calls("ip.write")]
    assert writes == [(w.offset, w.word) for w in dev.written] and len(writes) > 2 * 32  # b_beta/c_out per head
    assert {(e["offset"], e["value"]) for e in card.ops("reg.write")} == set(writes)
    assert all(read[w.name] & 0xFFFFFFFF == w.word for w in dev.written if w.name in read)


def test_register_writes_land_at_manifest_offsets(setup, xrt_stub):
    """Every SwiftMax register and every entry of the b_beta / c_out memories is written once, at the offset the
    manifest's map gives (entry i at offset + 4 i), as a two's-complement word; configuring runs nothing."""
    from dataclasses import replace

    layer, x, keep = _layer(per_head=True)
    card, dev = setup()
    with dev:
        dev.configure(layer)
        read = dev.verify_registers()
    table = {r["name"]: r for r in MANIFEST.kernel("engine_pl")["registers"]}
    depth = int(table["b_beta"]["depth"])
    regs = layer.swiftmax.register_values(replace(layer.sm_fmt, max_heads=depth))  # shared ints, per-head lists
    want = {(int(table[n]["offset"]) + 4 * i, e & 0xFFFFFFFF)
            for n, v in regs.items() for i, e in enumerate(v if isinstance(v, list) else [v])}
    scalars = [r for r in table.values() if r["access"] == "rw" and r["kind"] == "reg"]
    assert len(want) == len(scalars) + 2 * depth  # every shared register, every entry of b_beta and c_out
    writes = {(e["offset"], e["value"]) for e in card.ops("reg.write")}
    assert writes == want and all(e["kernel"] == "engine_pl" for e in card.ops("reg.write"))
    assert regs["u_lo"] < 0 and (int(table["u_lo"]["offset"]), regs["u_lo"] + (1 << 32)) in writes
    assert read["u_lo"] == regs["u_lo"] & 0xFFFFFFFF
    assert card.ops("start") == [] and xrt_stub.calls("graph.run") == []  # configure only: nothing ran


def test_configure_refusals(setup):
    """A map without a register golden sets is refused before any write; running before configure is an error."""
    layer, x, keep = _layer()

    def drop_reg(data):
        regs = next(k for k in data["kernels"] if k["name"] == "engine_pl")["registers"]
        regs[:] = [r for r in regs if r["name"] != "c_out"]
    with pytest.raises(DeviceError, match=r"no writable register for c_out"):
        register_writes(manifest_edit(MANIFEST, drop_reg), layer)
    _, dev = setup()
    with dev, pytest.raises(RuntimeError, match="configure"):
        dev.run_heads({})


def test_fake_checks_buffer_groups(tmp_path):
    """The fake pyxrt accepts a buffer only in the memory group of the argument it is passed to (or of another
    user of that argument: the A buffer both output movers share), so the group test of the backend can fail."""
    card = FakeEngineCard(MANIFEST)
    pyxrt = fake_pyxrt.module_for(card)
    dev = pyxrt.device(0)
    xuuid = dev.load_xclbin(pyxrt.xclbin(str(write_xclbin(tmp_path / "a.xclbin"))))
    out0 = pyxrt.kernel(dev, xuuid, "s2mm_engine:{s2mm_engine_0}")
    out1 = pyxrt.kernel(dev, xuuid, "s2mm_engine:{s2mm_engine_1}")
    a = pyxrt.bo(dev, 4096, pyxrt.bo.flags.normal, out0.group_id(1))  # s2mm_engine_0.a_out
    done = pyxrt.bo(dev, 4096, pyxrt.bo.flags.normal, out1.group_id(2))  # s2mm_engine_1.done
    with pytest.raises(ValueError, match=r"bo for s2mm_engine.*\.a_out was allocated in group"):
        out1(None, done, done, 1, 1, 1)  # the done buffer passed as a_out
    out1(None, a, done, 1, 1, 1)  # a_out from s2mm_engine_0's group: a user of the same argument
    assert card.ops("start")[-1]["kernel"] == "s2mm_engine_1"


def test_shim_without_xrt_names_what_is_missing(monkeypatch, tmp_path):
    """The graph shim without XRT's headers and library: one line naming each missing file (status 6), raised by
    the backend after pyxrt opened the card."""
    monkeypatch.setenv("XILINX_XRT", str(tmp_path))
    monkeypatch.setenv("VCKATTN_SHIM_DIR", str(tmp_path / "shim"))
    with pytest.raises(ToolMissing) as e:
        xrt_graph.load_shim()
    msg = str(e.value)
    assert "include/xrt/xrt_device.h" in msg and "experimental/xrt_graph.h" in msg and "libxrt_coreutil.so" in msg
    assert "\n" not in msg and e.value.exit_code == 6
    monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(FakeEngineCard(MANIFEST)))
    with pytest.raises(ToolMissing, match="XRT graph shim: XILINX_XRT="):
        XrtDevice(MANIFEST, xclbin=write_xclbin(tmp_path / "a.xclbin")).open()


def test_launch_call_order_and_arguments(setup, xrt_stub):
    layer, x, keep = _layer(1, 3)
    card, dev = setup()
    with dev:
        run_layer(dev, layer, x, keep)
    starts = [(e["kernel"], e["args"]) for e in card.ops("start")]
    assert [k for k, _ in starts] == ["s2mm_engine_0", "s2mm_engine_1", "mm2s_engine_k_0", "mm2s_engine_k_1",
                                      "mm2s_engine_v_0", "mm2s_engine_v_1", "mm2s_engine_q_0",
                                      "mm2s_engine_q_1"]  # consumers first
    args = dict(starts)
    p = dev.params
    assert args["mm2s_engine_q_0"]["kv"] == 0 and args["mm2s_engine_k_0"]["kv"] == 1 and \
        args["mm2s_engine_v_0"]["kv"] == 2
    assert args["mm2s_engine_q_0"]["payload_bytes"] == p.q_rows * p.d
    assert args["mm2s_engine_k_1"]["payload_bytes"] == args["mm2s_engine_v_1"]["payload_bytes"] == p.slice_keys * p.d
    assert args["mm2s_engine_q_0"]["n_cmds"] == args["mm2s_engine_q_1"]["n_cmds"] == 2 * 3  # 2 groups of 3 tiles
    assert args["mm2s_engine_k_1"]["n_cmds"] == args["mm2s_engine_v_1"]["n_cmds"] == 2 * 2 * p.kernels  # its group
    # and the filler group: both movers read the whole kv list
    assert [args[f"s2mm_engine_{i}"]["pipeline"] for i in range(2)] == [0, 1]
    assert args["s2mm_engine_0"]["n_slots"] == 9 and args["s2mm_engine_1"]["n_records"] == 6
    assert args["s2mm_engine_0"]["a_out"] == args["s2mm_engine_1"]["a_out"]  # one shared A buffer
    assert args["s2mm_engine_0"]["done"] != args["s2mm_engine_1"]["done"]
    graph = [c[0] for c in xrt_stub.calls() if c[0].startswith("graph.")]
    assert graph == ["graph.open", "graph.run", "graph.wait", "graph.end", "graph.close"]
    synced = [e for e in card.ops("bo.sync") if e["dir"] == "from_device"]
    assert len(synced) == 3  # the A buffer and the two done logs


def test_balanced_lists():
    layer, x, keep = _layer(1, 3)
    p = XrtDevice(MANIFEST).params
    q, k, v = (np.zeros((1, h, 45, 32), np.int8) for h in (3, 3, 3))
    launch = plan_launch(p, q, k, v, keep[:, None, :], False, layer.score_shift, layer.rq_a)
    lists = balanced_lists(launch.cmds)
    assert [b.own for b in lists] == [6, 3] and [len(b.q) for b in lists] == [6, 6]
    assert np.array_equal(lists[1].q[3:], launch.cmds.q[0][:3])  # pipeline 0's first group again
    assert np.array_equal(lists[1].kv[4:], launch.cmds.kv[0][:4])
    assert len(lists[0].filler_done) == 0 and len(lists[1].filler_done) == 3


@pytest.mark.parametrize(("knobs", "error", "message"), [
    ({"hang": "s2mm_engine_1"}, DeviceError, r"^device timeout after 40 ms in s2mm_engine_1 on launch 0$"),
    ({"hang": "engine_graph"}, DeviceError, r"^device timeout after 40 ms in the AIE graph engine_graph on launch 0$"),
    ({"fail": {"mm2s_engine_k_0": "ERT_CMD_STATE_ERROR"}}, DeviceError,
     r"^device error in mm2s_engine_k_0 on launch 0: run state ERT_CMD_STATE_ERROR$"),
    ({"done_fault": "duplicate"}, DeviceError, r"^xrt launch 0: pipeline 0: tile \d+ .* returned twice \(duplicate\)$"),
    ({"done_fault": "misroute"}, DeviceError, r"^xrt launch 0: pipeline 1: tile \d+ .* written by pipeline 0 .*"
                                              r"\(misrouted\)$"),
    ({"done_fault": "stale"}, DeviceError, r"^xrt launch 0: pipeline 0: s2mm_engine_0 wrote 0 of 18 done records "
                                           r"\(record 0 never written: a mover stopped early or records were lost\)$"),
])
def test_run_errors(setup, knobs, error, message):
    layer, x, keep = _layer()
    _, dev = setup(timeout_ms=40, **knobs)
    with pytest.raises(error, match=message) as e, dev:
        run_layer(dev, layer, x, keep)
    assert e.value.exit_code == 7 and "\n" not in str(e.value)


def test_filler_records_are_checked(setup):
    """The repeated group's records are checked too: a short pipeline whose filler records are wrong fails."""
    layer, x, keep = _layer(1, 3)
    _, dev = setup(done_fault="misroute")
    with pytest.raises(DeviceError, match=r"pipeline 1: done record 3 \(a repeated group that balances the "
                                          r"pipelines\) is .*'pipeline': 0.*expected .*'pipeline': 1"), dev:
        run_layer(dev, layer, x, keep)


def test_wrong_register_offset_gives_wrong_results(setup):
    """The fake card reads SwiftMax's constants at the manifest's offsets: a host writing two registers at each
    other's offsets gets results that differ from emu (so the bit-exact test above could fail)."""
    def swap(data):
        regs = next(k for k in data["kernels"] if k["name"] == "engine_pl")["registers"]
        a, s = (next(r for r in regs if r["name"] == n) for n in ("u_lo", "u_hi"))
        a["offset"], s["offset"] = s["offset"], a["offset"]
    layer, x, keep = _layer()
    _, dev = setup(manifest=manifest_edit(MANIFEST, swap), card_manifest=MANIFEST)
    with dev:
        got = run_layer(dev, layer, x, keep)
    assert not np.array_equal(got.out, _emu(layer, x, keep).out)


def test_open_errors(setup, monkeypatch, xrt_stub, tmp_path):
    monkeypatch.setitem(sys.modules, "pyxrt", None)
    with pytest.raises(ToolMissing, match="XRT not found: cannot import pyxrt"):
        XrtDevice(MANIFEST, xclbin=write_xclbin(tmp_path / "a.xclbin")).open()
    for knobs, message in [
        ({"xclbin_uuid": OTHER_UUID}, rf"xclbin UUID {OTHER_UUID} does not match .*engine_small\.json"),
        ({"missing_kernels": ("s2mm_engine",)}, r"the xclbin lacks kernel\(s\) s2mm_engine listed in"),
        ({"ids": {"engine_pl": 0x1234}}, r"kernel engine_pl: ID register at 0x0 reads 0x00001234, expected"),
    ]:
        _, dev = setup(**knobs)
        with pytest.raises(DeviceError, match=message):
            dev.open()
        assert dev._dev is None and dev._graph is None and dev._ip is None  # released on failure
    _, dev = setup()
    xrt_stub.fail("graph.open", "no graph engine_graph in the xclbin")
    with pytest.raises(DeviceError, match=r"^cannot open AIE graph 'engine_graph': no graph engine_graph in the"):
        dev.open()
    _, dev = setup(manifest=manifest_with_uuid("engine_small", None))
    with pytest.raises(DeviceError, match=r"xclbin\.uuid: the manifest records no built xclbin"):
        dev.open()
    _, dev = setup()
    monkeypatch.delenv("XILINX_XRT")
    with pytest.raises(ToolMissing, match="XILINX_XRT is not set"):
        dev.open()


def test_failing_xrt_calls(setup, xrt_stub):
    layer, x, keep = _layer()
    for op, message in [("ip.write", r"^kernel engine_pl: register write at 0x8 failed: bus error$"),
                        ("graph.run", r"^AIE graph engine_graph: run\(18\) failed: bus error$"),
                        ("graph.wait", r"^AIE graph engine_graph: wait failed: bus error$")]:
        _, dev = setup()
        xrt_stub.fail(op, "bus error", count=1)
        with pytest.raises(DeviceError, match=message), dev:
            run_layer(dev, layer, x, keep)


def test_cli_run_on_the_small_engine(setup, minilm_bundle, tmp_path, capsys, monkeypatch):
    """``vckattn run --backend xrt`` on the small engine: MiniLM's layers bit-exact, as on emu."""
    from vckattn.host.cli import main

    setup()
    mfile = tmp_path / "engine_small.json"
    mfile.write_text(json.dumps(MANIFEST.data))
    js = tmp_path / "r.json"
    code = main(["run", "--bundle", str(minilm_bundle), "--manifest", str(mfile), "--backend", "xrt", "--xclbin",
                 str(tmp_path / "engine_small.xclbin"), "--text", "The engine on a card, every bit checked.",
                 "--json", str(js), "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    rep = json.loads(js.read_text())
    assert rep["backend"] == "xrt" and rep["device"].startswith("hardware")
    assert [r["bit_exact"] for r in rep["layers"]] == [True, True]


def test_backend_check_lets_the_card_backends_run_engines():
    """Before any work, ``xrt`` and ``pynq`` are accepted for an engine build (each has its engine driver)."""
    from vckattn.host.backends import check_backend

    for backend in ("xrt", "pynq"):
        check_backend(backend, MANIFEST, None, [0])
