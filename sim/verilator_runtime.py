"""The Verilator runtime objects (``verilated.o``, ``verilated_vpi.o``, ``verilated_threads.o``, ...), compiled
once per configuration and reused by every Verilator build.

They are about two thirds of a small model's build time and do not depend on the model (cocotb's main,
``verilator.o``, does: it includes the model's ``Vtop.h``, so it is compiled with each model): only on the
Verilator installation, the compiler, the build's switches (``Vtop.mk``: tracing, coverage, timing,
threads), the user C flags and the environment's compiler variables. :func:`runtime_key` hashes exactly those.
The cocotb runner's build (:mod:`vckattn.sim.runner`) runs ``restore`` between Verilator and make, so make finds
the objects up to date, and ``store`` after make. Standalone (run as a script by the build; imports nothing of
vckattn): ``python verilator_runtime.py restore|store BUILD_DIR CACHE_DIR TRACE``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["ENV_VARS", "restore", "runtime_key", "runtime_objects", "store"]

#: environment variables that change how verilated.mk compiles the runtime
ENV_VARS = ("CXX", "CXXFLAGS", "CPPFLAGS", "OPT", "OPT_FAST", "OPT_SLOW", "OPT_GLOBAL", "OBJCACHE")


def _section(text: str, start: str, end: str) -> str:
    a = text.find(start)
    b = text.find(end, a + 1)
    if a < 0 or b < 0:
        raise ValueError(f"Vtop.mk: no '{start}' ... '{end}' section")
    return text[a:b]


def _user_cflags(text: str) -> str:
    lines = text.splitlines()
    out, inside = [], False
    for ln in lines:
        if ln.startswith("VM_USER_CFLAGS"):
            inside = True
        elif inside and not ln.startswith(" "):
            break
        if inside:
            out.append(ln)
    return "\n".join(out)


def runtime_key(build_dir: Path, trace: int) -> str:
    """16 hex digits of SHA-256 over what the runtime objects of the build in ``build_dir`` are compiled from."""
    mk = (build_dir / "Vtop.mk").read_text(encoding="utf-8")
    root = Path(_value(mk, "VERILATOR_ROOT"))
    cxx = os.environ.get("CXX") or "g++"
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False).stdout
    h = hashlib.sha256()
    for part in (str(root), (root / "include" / "verilated_config.h").read_text(errors="replace"), version,
                 _section(mk, "### Switches...", "### Vars..."), _user_cflags(mk),
                 f"VM_TRACE={trace}", *(f"{v}={os.environ.get(v, '')}" for v in ENV_VARS)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:16]


def _value(mk: str, name: str) -> str:
    for ln in mk.splitlines():
        if ln.startswith(f"{name} = "):
            return ln.split("=", 1)[1].strip()
    raise ValueError(f"Vtop.mk: no {name}")


def runtime_objects(build_dir: Path) -> list[Path]:
    """The runtime objects in ``build_dir``: Verilator's own (``verilated*.o``), not the model's (``Vtop*``) nor
    cocotb's main (``verilator.o``, which includes the model's header)."""
    return sorted(build_dir.glob("verilated*.o"))


def restore(build_dir: Path, cache_dir: Path, trace: int) -> int:
    """Copy the cached runtime objects of this build's configuration into ``build_dir``, dated now: make then finds
    them newer than their sources and than ``Vtop.mk`` (whose switches are in the key); the number copied (0: none
    cached yet)."""
    src = cache_dir / runtime_key(build_dir, trace)
    if not src.is_dir():
        return 0
    n = 0
    for obj in sorted(src.glob("*.o")):
        if not (build_dir / obj.name).exists():
            shutil.copyfile(obj, build_dir / obj.name)
            n += 1
    return n


def store(build_dir: Path, cache_dir: Path, trace: int) -> bool:
    """Keep this build's runtime objects for its configuration, unless already kept (whole or not at all: the
    folder is renamed into place). True if stored."""
    dst = cache_dir / runtime_key(build_dir, trace)
    objs = runtime_objects(build_dir)
    if dst.is_dir() or not objs:
        return False
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".runtime-", dir=cache_dir))
    for obj in objs:
        shutil.copy2(obj, tmp / obj.name)
    try:
        os.rename(tmp, dst)
    except OSError:  # another build stored it first
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 4 or argv[0] not in ("restore", "store"):
        print("usage: verilator_runtime.py restore|store BUILD_DIR CACHE_DIR TRACE", file=sys.stderr)
        return 2
    action, build_dir, cache_dir, trace = argv[0], Path(argv[1]), Path(argv[2]), int(argv[3])
    (restore if action == "restore" else store)(build_dir, cache_dir, trace)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
