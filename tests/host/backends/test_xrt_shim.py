"""The ``xrt`` backend's C++ shim and its ctypes layer (host/backends/xrt_graph.py), for real: the shim compiled
with g++ against the STUB XRT library (tests/fakes/xrt_stub: a stand-in for the absent XRT 2022.2, which records
every call and fails the ones it is told to) and loaded by the real ``load_shim``."""

from __future__ import annotations

import errno
import shutil
import subprocess
import uuid as uuidlib

import pytest
from conftest import require_tools

from vckattn.golden.errors import ToolMissing
from vckattn.host.backends import xrt_graph
from vckattn.host.backends.base import DeviceError

UUID = uuidlib.UUID("8f2c1e44-0b7a-4c1d-9e35-6a2b7d90c3f1")


def test_shim_compiles_against_the_stub_headers_without_warnings():
    require_tools("g++")
    from fakes.xrt_stub import INCLUDE

    cmd = ["g++", "-fsyntax-only", "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
           str(xrt_graph.SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_build_once_then_cached(xrt_stub):
    root = xrt_stub.root
    out = xrt_graph.build_shim()
    assert out.parent == root / "shim" and out.exists()
    mtime = out.stat().st_mtime_ns
    assert xrt_graph.build_shim() == out and out.stat().st_mtime_ns == mtime  # cached by source hash
    cmd = xrt_graph.compile_command(root, out)
    for flag in ("-shared", "-fPIC", "-std=c++17", f"-I{root / 'include'}", f"-L{root / 'lib'}", "-lxrt_coreutil"):
        assert flag in cmd
    assert xrt_graph.load_shim() is xrt_graph.load_shim()  # loaded once


def test_register_write_then_read(xrt_stub):
    shim = xrt_graph.load_shim()
    ip = shim.ip(0, UUID.bytes, "engine_pl")
    ip.write(0x08, 0x12345678)
    assert ip.read(0x08) == 0x12345678
    ip.write(0x0C, -5)  # a negative word goes as its two's complement
    assert xrt_stub.register("engine_pl", 0x0C) == (1 << 32) - 5 and ip.read(0x0C) == (1 << 32) - 5
    ip.write(0x10, (7 << 32) | 0xABCD)  # only the low 32 bits reach the register
    assert xrt_stub.register("engine_pl", 0x10) == 0xABCD
    ip.write(0x2000, 1)  # offsets pass unchanged, far ones too
    assert xrt_stub.register("engine_pl", 0x2000) == 1 and xrt_stub.register("engine_pl", 0x08) == 0x12345678
    assert ip.read(0x14) == 0  # never written
    ip.close()
    ip.close()  # once only
    assert xrt_stub.calls() == [
        ("device.open", "", 0, 0), ("ip.open", "engine_pl", 0, 0),
        ("ip.write", "engine_pl", 0x08, 0x12345678), ("ip.read", "engine_pl", 0x08, 0),
        ("ip.write", "engine_pl", 0x0C, (1 << 32) - 5), ("ip.read", "engine_pl", 0x0C, 0),
        ("ip.write", "engine_pl", 0x10, 0xABCD), ("ip.write", "engine_pl", 0x2000, 1),
        ("ip.read", "engine_pl", 0x14, 0), ("ip.close", "engine_pl", 0, 0)]
    with pytest.raises(DeviceError, match=r"kernel engine_pl: register offset -4 is outside"):
        ip.read(-4)


def test_graph_run_wait_end_sequence(xrt_stub):
    shim = xrt_graph.load_shim()
    g = shim.graph(0, UUID.bytes, "engine_graph")
    g.run(6)
    assert g.wait(250) is True
    g.run(2)
    assert g.wait(0) is True
    g.end()
    g.close()
    assert xrt_stub.calls() == [("device.open", "", 0, 0), ("graph.open", "engine_graph", 0, 0),
                                ("graph.run", "engine_graph", 6, 0), ("graph.wait", "engine_graph", 250, 0),
                                ("graph.run", "engine_graph", 2, 0), ("graph.wait", "engine_graph", 0, 0),
                                ("graph.end", "engine_graph", 0, 0), ("graph.close", "engine_graph", 0, 0)]
    with pytest.raises(DeviceError, match=r"AIE graph engine_graph: run iterations -1 is outside 0\.\.2147483647"):
        g.run(-1)


@pytest.mark.parametrize("code", [errno.ETIME, -errno.ETIME])
def test_graph_wait_timeout(xrt_stub, code):
    """XRT reports a graph still running at the time-out as a system_error with ETIME (either sign)."""
    g = xrt_graph.load_shim().graph(0, UUID.bytes, "engine_graph")
    xrt_stub.fail("graph.wait", "fail to wait graph", kind="system", code=code, count=1)
    g.run(1)
    assert g.wait(40) is False
    assert g.wait(40) is True  # the next wait finds it done
    assert [c[2] for c in xrt_stub.calls("graph.wait")] == [40, 40]


@pytest.mark.parametrize(("op", "action", "message"), [
    ("device.open", lambda s: s.graph(0, UUID.bytes, "engine_graph"),
     r"^cannot open AIE graph 'engine_graph': XRT says no$"),
    ("graph.open", lambda s: s.graph(0, UUID.bytes, "engine_graph"),
     r"^cannot open AIE graph 'engine_graph': XRT says no$"),
    ("ip.open", lambda s: s.ip(0, UUID.bytes, "engine_pl"),
     r"^cannot open kernel 'engine_pl' for register access: XRT says no$"),
    ("graph.run", lambda s: s.graph(0, UUID.bytes, "engine_graph").run(3),
     r"^AIE graph engine_graph: run\(3\) failed: XRT says no$"),
    ("graph.wait", lambda s: s.graph(0, UUID.bytes, "engine_graph").wait(10),
     r"^AIE graph engine_graph: wait failed: XRT says no$"),
    ("graph.end", lambda s: s.graph(0, UUID.bytes, "engine_graph").end(),
     r"^AIE graph engine_graph: end failed: XRT says no$"),
    ("ip.read", lambda s: s.ip(0, UUID.bytes, "engine_pl").read(0x10),
     r"^kernel engine_pl: register read at 0x10 failed: XRT says no$"),
    ("ip.write", lambda s: s.ip(0, UUID.bytes, "engine_pl").write(0x10, 3),
     r"^kernel engine_pl: register write at 0x10 failed: XRT says no$"),
])
def test_every_failing_call_is_one_line_device_error(xrt_stub, op, action, message):
    shim = xrt_graph.load_shim()
    xrt_stub.fail(op, "XRT says\n  no")  # a multi-line message comes back as one line
    with pytest.raises(DeviceError, match=message) as e:
        action(shim)
    assert e.value.exit_code == 7
    assert op in xrt_stub.ops()


@pytest.mark.parametrize(("kind", "code", "message"), [
    ("system", errno.EIO, r"wait failed: I/O went wrong"),  # a system_error that is not a time-out
    ("other", 3, r"wait failed: unknown C\+\+ exception in xrt::graph::wait\(\)"),
])
def test_wait_errors_are_not_timeouts(xrt_stub, kind, code, message):
    g = xrt_graph.load_shim().graph(0, UUID.bytes, "engine_graph")
    xrt_stub.fail("graph.wait", "I/O went wrong", kind=kind, code=code)
    with pytest.raises(DeviceError, match=message):
        g.wait(10)


def test_non_std_exceptions_are_caught(xrt_stub):
    shim = xrt_graph.load_shim()
    for op, action, message in [
        ("graph.open", lambda: shim.graph(0, UUID.bytes, "g"), r"unknown C\+\+ exception in xrt::graph\(\)"),
        ("ip.read", lambda: shim.ip(0, UUID.bytes, "k").read(4), r"unknown C\+\+ exception in xrt::ip::read_register"),
        ("ip.write", lambda: shim.ip(0, UUID.bytes, "k").write(4, 1),
         r"unknown C\+\+ exception in xrt::ip::write_register"),
        ("graph.run", lambda: shim.graph(0, UUID.bytes, "g").run(1), r"unknown C\+\+ exception in xrt::graph::run"),
    ]:
        xrt_stub.fail(op, "", kind="other", code=1, count=1)
        with pytest.raises(DeviceError, match=message):
            action()


def test_wrong_uuid_and_card_index(xrt_stub):
    shim = xrt_graph.load_shim()
    xrt_stub.load(str(UUID))
    other = uuidlib.UUID("00000000-0000-0000-0000-000000000001")
    with pytest.raises(DeviceError, match=rf"cannot open AIE graph 'engine_graph': No xclbin with UUID {other} is "):
        shim.graph(0, other.bytes, "engine_graph")
    shim.graph(0, UUID.bytes, "engine_graph").close()  # the UUID's bytes reach XRT in order
    with pytest.raises(DeviceError, match=r"cannot open kernel 'engine_pl' .*: Could not open device with index '2'"):
        shim.ip(2, UUID.bytes, "engine_pl")
    with pytest.raises(ValueError, match="16 bytes"):
        shim.ip(0, b"short", "engine_pl")


def test_abi_mismatch_and_missing_functions(xrt_stub, tmp_path):
    """A shim library of another ABI version, or lacking a function, is refused in one line."""
    root = xrt_stub.root
    src = tmp_path / "old_shim.cpp"
    text = xrt_graph.SOURCE.read_text()
    old = "int vckattn_shim_abi_version(void) { return 1; }"
    assert old in text and xrt_graph.ABI_VERSION == 1
    src.write_text(text.replace(old, "int vckattn_shim_abi_version(void) { return 2; }"))
    out = tmp_path / "libold.so"
    subprocess.run(xrt_graph.compile_command(root, out, src), check=True, capture_output=True)
    with pytest.raises(DeviceError, match=rf"^XRT graph shim: {out} has ABI 2, expected 1$"):
        xrt_graph.Shim(out)

    src.write_text(text.replace("void vckattn_ip_close(void* handle) {", "void vckattn_ip_gone(void* handle) {"))
    out = tmp_path / "libgone.so"
    subprocess.run(xrt_graph.compile_command(root, out, src), check=True, capture_output=True)
    with pytest.raises(DeviceError, match=rf"^XRT graph shim: {out} lacks vckattn_ip_close \("):
        xrt_graph.Shim(out)
    with pytest.raises(DeviceError, match=r"^XRT graph shim: cannot load .*nothing\.so"):
        xrt_graph.Shim(tmp_path / "nothing.so")


def test_compile_failure_is_one_line(xrt_stub, tmp_path, monkeypatch):
    root = tmp_path / "xrt"
    shutil.copytree(xrt_stub.root / "include", root / "include")
    shutil.copytree(xrt_stub.root / "lib", root / "lib")
    (root / "include" / "experimental" / "xrt_ip.h").write_text("#error this XRT is broken\n")
    monkeypatch.setenv("XILINX_XRT", str(root))
    monkeypatch.setenv("VCKATTN_SHIM_DIR", str(tmp_path / "shim"))
    with pytest.raises(DeviceError, match=r"^XRT graph shim: g\+\+ failed building xrt_graph_shim\.cpp: .*this XRT "
                                          r"is broken") as e:
        xrt_graph.load_shim()
    assert "\n" not in str(e.value)
    assert list((tmp_path / "shim").iterdir()) == []  # nothing half-built left behind


def test_missing_xrt_is_tool_missing(xrt_stub, tmp_path, monkeypatch):
    monkeypatch.delenv("XILINX_XRT")
    with pytest.raises(ToolMissing, match=r"XILINX_XRT is not set \(install XRT 2022\.2") as e:
        xrt_graph.load_shim()
    assert e.value.exit_code == 6
    root = tmp_path / "xrt"  # headers and library absent: each named, one line
    root.mkdir()
    monkeypatch.setenv("XILINX_XRT", str(root))
    with pytest.raises(ToolMissing) as e:
        xrt_graph.load_shim()
    msg = str(e.value)
    for needle in ("include/xrt/xrt_device.h", "include/xrt/xrt_uuid.h", "experimental/xrt_graph.h",
                   "experimental/xrt_ip.h", "lib/libxrt_coreutil.so"):
        assert needle in msg
    assert "\n" not in msg
    shutil.copytree(xrt_stub.root / "include", root / "include")  # headers but no library
    with pytest.raises(ToolMissing, match=r"lacks .*lib/libxrt_coreutil\.so \(install XRT") as e:
        xrt_graph.load_shim()
    assert "xrt_device.h" not in str(e.value)
