"""host/deploy.py: ``deploy()`` of an engine build on a FAKE card behind a FAKE pyxrt and, through the project's real
C++ shim and ctypes layer, the STUB XRT library (tests/fakes: they record calls; they are not hardware), and every
one-line refusal, through the CLI too (exit statuses 6 and 7)."""

from __future__ import annotations

import json
import sys

import pytest
from fakes import fake_pyxrt
from fakes.engine_card import FakeEngineCard
from fakes.xrt_stub import card_handler
from hw_jobs import OTHER_UUID, UUID, bundle_parts, manifest_with_uuid, write_xclbin

from vckattn.golden.errors import ToolMissing, UserError
from vckattn.host import deploy as deploy_mod
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.xrt import XRT_MISSING
from vckattn.host.bundle import BundleError, write_bundle
from vckattn.host.deploy import deploy
from vckattn.hw.design.manifest import ManifestError

ENGINE = manifest_with_uuid("engine_small", OTHER_UUID)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """One-layer bundles: online softmax, and SwiftMax with head size 16 (neither runs on engine_small)."""
    root = tmp_path_factory.mktemp("bundles")
    return {"softmax": write_bundle(root / "softmax", *bundle_parts("softmax")),
            "hd16": write_bundle(root / "hd16", *bundle_parts("swiftmax", head_dim=16, heads=4))}


@pytest.fixture(scope="module")
def engine_bundle(tmp_path_factory):
    """A one-layer SwiftMax bundle with head size 32 and the score maximum an engine build needs (``score_absmax``
    sets its 8-bit score shift)."""
    manifest, tensors, meta = bundle_parts("swiftmax", head_dim=32, heads=2)
    manifest["layers"][0]["score_absmax"] = 20_000
    return write_bundle(tmp_path_factory.mktemp("engine_bundle") / "b", manifest, tensors, meta)


@pytest.fixture
def engine_card(monkeypatch, xrt_stub, tmp_path):
    """``engine_card(**knobs)``: the FAKE engine card behind the fake pyxrt and the stub XRT library, and a
    bitstreams/ folder whose engine_small manifest records its UUID (the vck5000_engine one records none)."""
    folder = tmp_path / "bitstreams_engine"
    folder.mkdir()
    (folder / "engine_small.json").write_text(json.dumps(ENGINE.data))
    (folder / "vck5000_engine.json").write_text(json.dumps(manifest_with_uuid("vck5000_engine", None).data))
    monkeypatch.setattr(deploy_mod, "BITSTREAMS", folder)

    def make(**knobs):
        c = FakeEngineCard(ENGINE, **knobs)
        monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt.module_for(c))
        xrt_stub.set_handler(card_handler(c))
        return c
    return make


def test_deploy_engine(engine_card, xrt_stub, tmp_path, engine_bundle):
    """An engine build: found by the xclbin's UUID, every mover unit, the PL top and the graph opened, layer 0's
    SwiftMax registers (narrowed to the build's 8-bit scores, as `run` does) written through the shim and read
    back; nothing runs."""
    from vckattn.golden.quant_attention import narrow_layer
    from vckattn.host.backends.hwio import normalizer_values
    from vckattn.host.bundle import load_bundle
    from vckattn.host.export import to_quant_layer

    card = engine_card()
    xclbin = write_xclbin(tmp_path / "engine_small.xclbin")
    report = deploy(xclbin, engine_bundle)
    assert report["manifest"] == "engine_small" and report["uuid"] == OTHER_UUID
    assert report["manifest_file"] == str(tmp_path / "bitstreams_engine" / "engine_small.json")
    assert report["device_index"] == 0 and report["layer"] == 0 and report["normalizer"] == "swiftmax"
    assert report["xclbin"] == str(xclbin)
    assert report["device"].startswith("hardware: VCK5000") and report["score_bits"] == 8
    names = {k["name"] for k in report["kernels_checked"]}
    assert names == {f"mm2s_engine_{r}_{i}" for r in "qkv" for i in (0, 1)} | \
        {"s2mm_engine_0", "s2mm_engine_1", "engine_pl", "engine_graph"}
    regs = report["registers_written"]
    assert regs and {r["kernel"] for r in regs} == {"engine_pl"} and all(r["word"] == r["readback"] for r in regs)
    assert [(a, b) for _, _, a, b in xrt_stub.calls("ip.write")] == [(r["offset"], int(r["word"], 16)) for r in regs]
    # the values written are golden's registers of the narrowed layer (not the bundle's int32-score layer)
    def flat(values):  # "b_beta[3]": entry 3 of a memory
        return {f"{n}[{i}]" if isinstance(v, list) else n: x for n, v in values.items()
                for i, x in (enumerate(v) if isinstance(v, list) else [(0, v)])}
    wide = to_quant_layer(load_bundle(engine_bundle), 0)
    want = flat(normalizer_values(narrow_layer(wide, 8), ENGINE.regmap("engine_pl")))
    got = {r["register"]: r["value"] for r in regs}
    assert got == {n: want[n] for n in got} and set(got) >= {"a_mult", "u_lo", "b_beta[1]"}
    int32 = flat(normalizer_values(wide, ENGINE.regmap("engine_pl")))
    assert got != {n: int32[n] for n in got}  # narrowing the scores changes the registers
    table = {r["name"]: r["offset"] for r in ENGINE.kernel("engine_pl")["registers"]}

    def offset(name: str) -> int:  # a register, or entry i of a memory: "b_beta[3]" at b_beta + 4·3
        base, _, i = name.partition("[")
        return table[base] + 4 * int(i.rstrip("]") or 0)
    assert all(r["offset"] == offset(r["register"]) for r in regs)
    assert [(e["offset"], e["value"]) for e in card.ops("reg.write")] == [(r["offset"], int(r["word"], 16))
                                                                          for r in regs]
    assert card.ops("start") == [] and xrt_stub.calls("graph.run") == []  # deploy runs nothing
    json.dumps(report)


def test_deploy_with_an_explicit_manifest(engine_card, tmp_path, engine_bundle):
    engine_card()
    mfile = tmp_path / "m.json"
    mfile.write_text(json.dumps(ENGINE.data))
    report = deploy(write_xclbin(tmp_path / "a.xclbin"), engine_bundle, mfile, 0, device_options={"timeout_ms": 5})
    assert report["manifest_file"] == str(mfile)


def test_deploy_errors(engine_card, monkeypatch, tmp_path, engine_bundle, bundles):
    xclbin = write_xclbin(tmp_path / "a.xclbin")
    b = engine_bundle
    with pytest.raises(BundleError, match="no such bundle folder"):
        deploy(xclbin, tmp_path / "nobundle")

    monkeypatch.setitem(sys.modules, "pyxrt", None)
    with pytest.raises(ToolMissing) as e:  # a missing runtime: exit status 6
        deploy(xclbin, b)
    assert str(e.value) == XRT_MISSING

    engine_card()
    with pytest.raises(DeviceError, match=r"missing\.xclbin: xclbin file not found"):
        deploy(tmp_path / "missing.xclbin", b)
    (tmp_path / "dir.xclbin").mkdir()
    with pytest.raises(DeviceError, match=r"dir\.xclbin: not a regular file"):
        deploy(tmp_path / "dir.xclbin", b)

    engine_card(unreadable_xclbin=True)
    with pytest.raises(DeviceError, match=r"a\.xclbin: cannot read the xclbin: Invalid xclbin"):
        deploy(xclbin, b)

    engine_card()
    with pytest.raises(DeviceError, match=r"^no card at index 3: "):
        deploy(xclbin, b, device_index=3)

    engine_card(xclbin_uuid=UUID)
    with pytest.raises(ManifestError, match=rf"xclbin\.uuid: no manifest records the UUID {UUID} of .*a\.xclbin "
                                            rf"\(pass --manifest\); built manifests: engine_small \({OTHER_UUID}\)$"):
        deploy(xclbin, b)
    given = tmp_path / "given.json"
    given.write_text(json.dumps(ENGINE.data))
    with pytest.raises(DeviceError, match=rf"xclbin UUID {UUID} does not match .*given\.json \({OTHER_UUID}\)"):
        deploy(xclbin, b, given)
    null = tmp_path / "null.json"
    null.write_text(json.dumps(manifest_with_uuid("engine_small", None).data))
    with pytest.raises(DeviceError, match=r"null\.json: xclbin\.uuid: the manifest records no built xclbin"):
        deploy(xclbin, b, null)

    engine_card(missing_kernels=("s2mm_engine",))
    with pytest.raises(DeviceError, match=r"the xclbin lacks kernel\(s\) s2mm_engine listed in"):
        deploy(xclbin, b)

    engine_card(ids={"engine_pl": 0})
    with pytest.raises(DeviceError, match=r"kernel engine_pl: ID register at 0x0 reads 0x00000000, expected"):
        deploy(xclbin, b)

    off = ENGINE.register_offset("engine_pl", "c_out")
    engine_card(stuck={("engine_pl", off): 0x1234})
    with pytest.raises(DeviceError, match=rf"register readback mismatch: engine_pl\.c_out\[0\] at {off:#x}: "
                                          r"wrote 0x[0-9a-f]{8}, read 0x00001234"):
        deploy(xclbin, b)

    engine_card()
    with pytest.raises(ManifestError, match=r"tile\.head_dims: the bundle's head_dim 16 is not supported"):
        deploy(xclbin, bundles["hd16"])
    with pytest.raises(UserError, match=r"softmax|SwiftMax"):  # the build has no online-softmax normalizer
        deploy(xclbin, bundles["softmax"])
    sub = tmp_path / "sub.json"
    sub.write_text(json.dumps(manifest_with_uuid("sublayer_small_encoder", OTHER_UUID).data))
    with pytest.raises(UserError, match=r"sublayer_small_encoder: `vckattn deploy` configures an attention engine "
                                        r"build \(this manifest is a sublayer build\)"):
        deploy(xclbin, b, sub)


def test_errors_are_one_line_user_errors(engine_card, tmp_path, engine_bundle):
    engine_card(xclbin_uuid=UUID)
    for call in (lambda: deploy(write_xclbin(tmp_path / "a.xclbin"), engine_bundle),
                 lambda: deploy(tmp_path / "none.xclbin", engine_bundle)):
        with pytest.raises(UserError) as e:
            call()
        assert "\n" not in str(e.value)


@pytest.mark.parametrize(("knobs", "fault", "status", "needle"), [
    ({}, "ip.write", 7, "kernel engine_pl: register write at 0x8 failed: AXI4-Lite write timed out"),
    ({"stuck": "a_mult"}, None, 7, "register readback mismatch: engine_pl.a_mult"),
    ({"xclbin_uuid": UUID}, None, 5, f"no manifest records the UUID {UUID}"),
    ({}, "graph.open", 7, "cannot open AIE graph 'engine_graph': AXI4-Lite write timed out"),
    ({}, "no XRT", 6, "XRT graph shim: XILINX_XRT is not set"),
])
def test_cli_deploy_engine_errors(engine_card, xrt_stub, monkeypatch, tmp_path, engine_bundle, capsys, knobs, fault,
                                  status, needle):
    from vckattn.host.cli import main

    if knobs.get("stuck"):
        off = int(next(r for r in ENGINE.kernel("engine_pl")["registers"] if r["name"] == knobs["stuck"])["offset"])
        knobs = {"stuck": {("engine_pl", off): 0x1234}}
    engine_card(**knobs)
    if fault == "no XRT":
        monkeypatch.delenv("XILINX_XRT")
    elif fault:
        xrt_stub.fail(fault, "AXI4-Lite write timed out")
    out = tmp_path / "deploy.json"
    rc = main(["deploy", "--xclbin", str(write_xclbin(tmp_path / "a.xclbin")), "--bundle", str(engine_bundle),
               "--json", str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == status, err
    assert needle in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()


def test_cli_deploy_engine_json(engine_card, tmp_path, engine_bundle, capsys):
    from vckattn.host.cli import main

    engine_card()
    out = tmp_path / "deploy.json"
    rc = main(["deploy", "--xclbin", str(write_xclbin(tmp_path / "a.xclbin")), "--bundle", str(engine_bundle),
               "--json", str(out)])
    assert rc == 0, capsys.readouterr().err
    assert json.loads(out.read_text())["manifest"] == "engine_small"


def test_deploy_refused_under_emulation(monkeypatch, tmp_path, engine_bundle, capsys):
    """Deploy configures a real card: under VCKATTN_EMULATION it is refused, naming the emulated path."""
    from vckattn.host.cli import main

    monkeypatch.setenv("VCKATTN_EMULATION", "csim")
    rc = main(["deploy", "--xclbin", str(write_xclbin(tmp_path / "a.xclbin")), "--bundle", str(engine_bundle)])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert "configures a real card" in err and "vckattn board selftest --manifest M" in err and \
        "unset VCKATTN_EMULATION for this command" in err
