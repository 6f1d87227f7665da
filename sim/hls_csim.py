"""C-simulation of HLS C++ with plain g++ and AMD's open-source ``ap_types`` headers.

Vitis HLS is not available on these machines, but the arbitrary-precision headers it uses
(``ap_int.h``, ``ap_fixed.h``, ``hls_stream.h``, ...) ship inside the ``hls4ml`` wheel
(``hls4ml/templates/vivado/ap_types/``). Compiled with g++ they compute exactly what Vitis
HLS C-simulation computes for the same types, so HLS kernels and the golden models in
``vckattn.golden`` can be checked against them bit for bit.

Typical use from a pytest test::

    from vckattn.sim.hls_csim import compile_cpp, csim_available, run_binary

    pytestmark = pytest.mark.skipif(not csim_available(), reason="needs g++ and hls4ml")

    exe = compile_cpp([Path("sim/cpp/my_kernel_tb.cpp")], "my_kernel_tb")
    out = run_binary(exe, stdin_bytes=b"1 2 3\\n", timeout=30)

What it takes care of:

* The include folder is found inside the installed ``hls4ml`` package
  (:func:`ap_types_include`); ``hls4ml`` is only located, never imported.
* Binaries go under ``build_root()/hls/<name>/`` (:mod:`vckattn.golden.paths`: ``<repo>/build`` in a
  checkout). A build is skipped when the
  same source text, flags, include folder and compiler were already built there (SHA-256 of
  all of them, stored next to the binary); the binary is replaced atomically. Each build is made
  once per content in :func:`csim_cache_root` (under a lock) and linked from there, so parallel
  processes share it.
* g++ runs with ``-std=c++14 -O2 -w``. ``-w`` is deliberate: g++ 12 reports dozens of
  ``-Wuninitialized``/``-Wmaybe-uninitialized`` warnings that originate in the vendor headers
  (``etc/ap_private.h``) after inlining, so ``-isystem`` alone does not silence them. Pass
  ``extra_flags=("-Wall",)`` (later flags win) when you want warnings for your own code.
* A failed build raises :class:`CompileError` whose message holds the command and g++'s
  stderr; a failed run raises :class:`RunError` with the exit status and stderr.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from vckattn.golden.paths import build_lock, build_root

__all__ = [
    "ASAN_FLAGS",
    "BASE_FLAGS",
    "FLAGS",
    "REPO_ROOT",
    "CompileError",
    "HlsToolsMissing",
    "RunError",
    "ap_types_include",
    "asan_available",
    "hls_build_root",
    "compile_cpp",
    "compile_object",
    "csim_cache_root",
    "cxx",
    "csim_available",
    "run_binary",
]

#: Repository root (this file lives in ``<repo>/sim/``).
REPO_ROOT: Path = Path(__file__).resolve().parent.parent


def hls_build_root() -> Path:
    """Parent folder of every C-simulation build: ``build_root()/hls`` (read at call time)."""
    return build_root() / "hls"


#: where C-simulation executables and shared objects are kept by content (shared by parallel test workers)
CSIM_CACHE_ENV = "VCKATTN_CSIM_CACHE"


def csim_cache_root() -> Path:
    """The folder of C-simulation builds kept by content (``<name>-<digest>/``, each built once under a lock and
    linked into ``hls_build_root()/<name>/``) and of the objects and Verilated models several builds share:
    ``$VCKATTN_CSIM_CACHE`` or ``<build root>/csimcache``."""
    env = os.environ.get(CSIM_CACHE_ENV)
    return Path(env) if env else build_root() / "csimcache"


def __getattr__(name: str) -> Path:
    # HLS_BUILD_ROOT is computed on each access so that VCKATTN_BUILD_DIR set later (--build-dir) applies.
    if name == "HLS_BUILD_ROOT":
        return hls_build_root()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Flags used for every build, before ``extra_flags`` (see the module docstring for ``-w``).
BASE_FLAGS: tuple[str, ...] = ("-std=c++14", "-O2", "-w")

_CXX_ENV = "CXX"  # set CXX=/path/to/g++ to use another compiler


class HlsToolsMissing(RuntimeError):
    """g++ or the hls4ml ``ap_types`` headers are not installed."""


class CompileError(RuntimeError):
    """g++ failed; the message holds the command line and g++'s stderr."""


class RunError(RuntimeError):
    """A C-simulation binary exited with a non-zero status (or timed out)."""


@lru_cache(maxsize=1)
def ap_types_include() -> Path:
    """The ``ap_types`` folder (``ap_fixed.h`` and friends) of the installed hls4ml package."""
    spec = importlib.util.find_spec("hls4ml")
    if spec is None or not spec.submodule_search_locations:
        raise HlsToolsMissing("hls4ml is not installed (pip install 'vckattn[hls]' provides the ap_types headers)")
    for location in spec.submodule_search_locations:
        inc = Path(location) / "templates" / "vivado" / "ap_types"
        if (inc / "ap_fixed.h").is_file():
            return inc
    where = list(spec.submodule_search_locations)
    raise HlsToolsMissing(f"no templates/vivado/ap_types/ap_fixed.h inside hls4ml at {where}")


def cxx() -> str:
    """The C++ compiler of the C-simulation (``$CXX``, default g++) on ``PATH``; HlsToolsMissing if absent."""
    name = os.environ.get(_CXX_ENV) or "g++"
    path = shutil.which(name)
    if path is None:
        raise HlsToolsMissing(f"C++ compiler {name!r} not found on PATH")
    return path


@lru_cache(maxsize=4)
def _cxx_version(cxx: str) -> str:
    return subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False).stdout.strip()


def csim_available() -> bool:
    """True when g++ and the ap_types headers are both present (use for ``pytest.mark.skipif``)."""
    try:
        cxx()
        ap_types_include()
    except HlsToolsMissing:
        return False
    return True


def compile_object(source: Path, out_dir: Path, extra_flags: Sequence[str] = (),
                   depends: Sequence[Path | str] = ()) -> Path:
    """Compile one C++ source file into an object file in ``out_dir`` and return its path, for :func:`compile_cpp`'s
    ``objects``: a translation unit that several builds share (a Verilated model, Verilator's runtime) is compiled
    once. The flags are :func:`compile_cpp`'s (the source's folder, then the ap_types folder, then ``extra_flags``).
    The object's name holds a SHA-256 of the compiler, the flags, the source text and the texts of ``depends`` (the
    headers of your own it includes), so a changed input makes a new object and an unchanged one is reused."""
    compiler = cxx()
    inc = ap_types_include()
    src = Path(source).resolve()
    cmd = [compiler, *BASE_FLAGS, f"-I{src.parent}", f"-I{inc}", *extra_flags, "-c", str(src), "-o"]
    h = hashlib.sha256()
    for part in (_cxx_version(compiler), *cmd, src.read_text(), *(Path(d).read_text() for d in depends)):
        h.update(part.encode())
        h.update(b"\0\1")
    obj = Path(out_dir) / f"{src.stem}-{h.hexdigest()[:16]}.o"
    if obj.is_file():
        return obj
    with build_lock(obj.parent):  # one compile per object, shared by every process
        if not obj.is_file():
            _run_compiler(cmd, obj, f"compiling {src.name}")
    return obj


def _run_compiler(cmd: list[str], out: Path, what: str) -> None:
    """Run ``cmd`` (a g++ command line ending in ``-o``) into a temporary file beside ``out``, then move it to
    ``out`` atomically; CompileError with the command and g++'s stderr when it fails."""
    tmp = out.with_name(f".{out.name}.tmp")
    proc = subprocess.run([*cmd, str(tmp)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise CompileError(f"g++ failed (exit {proc.returncode}) {what}\n"
                           f"command: {shlex.join([*cmd, str(tmp)])}\n--- g++ stderr ---\n{proc.stderr.strip()}")
    os.replace(tmp, out)


def compile_cpp(sources: Sequence[Path | str] | str, name: str, extra_flags: Sequence[str] = (),
                depends: Sequence[Path | str] = (), objects: Sequence[Path] = ()) -> Path:
    """Compile C++ into ``build_root()/hls/<name>/<name>`` and return the executable's path.

    ``sources`` is either the source text of one translation unit (a ``str``; written to
    ``<name>.cpp`` in the build folder) or a list of source files. Each source file's folder is
    on the include path, before the ap_types folder. ``objects``: object files linked in
    (:func:`compile_object`). The build is skipped when the source texts, the objects, the flags,
    the ap_types folder and the compiler are unchanged; headers of your own that the sources
    include are only tracked when listed in ``depends``.
    """
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(f"invalid build name {name!r}")
    compiler = cxx()
    inc = ap_types_include()
    out_dir = hls_build_root() / name
    out_dir.mkdir(parents=True, exist_ok=True)

    if isinstance(sources, str):
        src_path = out_dir / f"{name}.cpp"
        texts = [(src_path.name, sources)]
        if not src_path.is_file() or src_path.read_text() != sources:
            src_path.write_text(sources)
        src_paths = [src_path]
    else:
        src_paths = [Path(s).resolve() for s in sources]
        if not src_paths:
            raise ValueError("no sources given")
        for s in src_paths:
            if not s.is_file():
                raise FileNotFoundError(s)
        texts = [(str(s), s.read_text()) for s in src_paths]
    texts += [(str(Path(d).resolve()), Path(d).read_text()) for d in depends]
    objs = [Path(o).resolve() for o in objects]
    texts += [(str(o), hashlib.sha256(o.read_bytes()).hexdigest()) for o in objs]

    include_dirs = list(dict.fromkeys(str(s.parent) for s in src_paths))
    exe = out_dir / name
    cmd = [compiler, *BASE_FLAGS, *(f"-I{d}" for d in include_dirs), f"-I{inc}", *extra_flags,
           *(str(s) for s in src_paths), *(str(o) for o in objs), "-o"]

    h = hashlib.sha256()
    for part in (_cxx_version(compiler), str(inc), *cmd, *(f"{n}\0{t}" for n, t in texts)):
        h.update(part.encode())
        h.update(b"\0\1")
    digest = h.hexdigest()
    stamp = out_dir / f"{name}.sha256"
    if exe.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return exe

    cached = csim_cache_root() / f"{name}-{digest[:16]}"
    with build_lock(cached):  # one build per content, shared by every process (the parallel test workers)
        built = cached / name
        if not built.is_file():
            _run_compiler(cmd, built, f"building {name!r}")
    tmp = out_dir / f".{name}.{os.getpid()}.tmp"
    tmp.unlink(missing_ok=True)
    try:
        os.link(built, tmp)
    except OSError:  # the cache on another file system
        shutil.copy2(built, tmp)
    os.replace(tmp, exe)
    stamp.write_text(digest + "\n")
    return exe


def run_binary(path: Path | str, stdin_bytes: bytes | None = None, *, input_file: Path | str | None = None,
               args: Sequence[str] = (), timeout: float = 60.0, cwd: Path | str | None = None) -> bytes:
    """Run a C-simulation binary and return its stdout.

    Its standard input is ``stdin_bytes`` or the contents of ``input_file`` (not both; neither
    gives an empty input). Raises :class:`RunError` on a non-zero exit or after ``timeout``
    seconds, with the binary's stderr in the message.
    """
    if stdin_bytes is not None and input_file is not None:
        raise ValueError("give stdin_bytes or input_file, not both")
    data = Path(input_file).read_bytes() if input_file is not None else (stdin_bytes or b"")
    cmd = [str(path), *args]
    try:
        proc = subprocess.run(cmd, input=data, capture_output=True, timeout=timeout, cwd=cwd, check=False)
    except subprocess.TimeoutExpired as e:
        raise RunError(f"{shlex.join(cmd)} timed out after {timeout} s") from e
    if proc.returncode != 0:
        stderr = proc.stderr.decode(errors="replace").strip()
        raise RunError(f"{shlex.join(cmd)} exited with status {proc.returncode}\n--- stderr ---\n{stderr}")
    return proc.stdout


#: the stream test benches' optimization: -O1 builds faster than the default -O2 and is plenty for them
FLAGS = ("-O1",)
#: AddressSanitizer: a kernel reading or writing outside a DDR buffer the test bench passes fails the run
ASAN_FLAGS = ("-fsanitize=address", "-fno-omit-frame-pointer")


@lru_cache(maxsize=1)
def asan_available() -> bool:
    """True when g++ builds with AddressSanitizer (then the movers' test benches use it)."""
    try:
        compile_cpp("int main() { return 0; }\n", "asan_probe", extra_flags=ASAN_FLAGS)
    except CompileError:
        return False
    return True
