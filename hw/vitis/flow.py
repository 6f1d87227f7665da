"""The Vitis build flow's Python side: tool check, the engine's generated sources and make variables, xclbin
UUID recording.

The full description: ``docs/internals/hw.md``, section ``hw/vitis/flow.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vckattn.hw.design.manifest import PLATFORMS

__all__ = ["DEFAULT_PLATFORM", "DESIGNS", "ENGINE_HLS", "ENGINE_SOURCES", "PLATFORM_DIRS", "REQUIRED_TOOLS",
           "FlowError", "board_of", "check_engine_sources", "check_tools", "default_design_file", "engine_inputs",
           "find_platform", "flow_variables", "format_problems", "parse_xclbin_info", "read_manifest", "record_uuid"]

REPO_ROOT = Path(__file__).resolve().parents[2]
BITSTREAMS = REPO_ROOT / "bitstreams"
#: the committed engine designs (``<name>.design.json``)
DESIGNS = BITSTREAMS / "engine_designs"
DEFAULT_PLATFORM = PLATFORMS["vck5000"]
#: Tools the flow runs (name -> what it is for), checked on ``PATH``.
REQUIRED_TOOLS: dict[str, str] = {
    "v++": "Vitis compiler/linker (HLS kernels, link, package)",
    "aiecompiler": "AI Engine compiler (the AIE graph)",
    "vivado": "Vivado (packages the RTL PL top into .xo)",
    "xclbinutil": "reads the xclbin's UUID after packaging",
}
#: Searched for ``<platform>.xpfm`` after the folders of ``$PLATFORM_REPO_PATHS`` (where the platform
#: packages install).
PLATFORM_DIRS: tuple[str, ...] = ("/opt/xilinx/platforms",)
_UUID = re.compile(r"^\s*UUID \(xclbin\):\s*([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{12})\s*$", re.M)
_KERNELS = re.compile(r"^\s*Kernels:\s*(.*?)\s*$", re.M)


class FlowError(Exception):
    """A build step that cannot go on (reported on stderr by the command line, exit status 1)."""


# ---------------------------------------------------------------------------------------- checks


def find_platform(platform: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The ``<platform>.xpfm`` under ``$PLATFORM_REPO_PATHS`` (colon-separated) or :data:`PLATFORM_DIRS`:
    ``<dir>/<platform>.xpfm``, ``<dir>/<platform>/<platform>.xpfm`` or one level deeper; else ``None``."""
    env = os.environ if env is None else env
    dirs = [d for d in env.get("PLATFORM_REPO_PATHS", "").split(os.pathsep) if d] + list(PLATFORM_DIRS)
    name = f"{platform}.xpfm"
    for d in dirs:
        root = Path(d)
        for cand in (root / name, root / platform / name):
            if cand.is_file():
                return cand
        if root.is_dir():
            found = sorted(root.glob(f"*/*/{name}"))
            if found:
                return found[0]
    return None


def check_tools(platform: str = DEFAULT_PLATFORM, *, target: str = "hw",
                env: Mapping[str, str] | None = None) -> list[str]:
    """Problems that stop the Vitis flow before it starts, one line each (empty: good to go).

    Checks: every tool of :data:`REQUIRED_TOOLS` (and ``emconfigutil`` for ``hw_emu``) on ``env``'s
    ``PATH``; ``XILINX_VITIS`` set to a folder; the platform's ``.xpfm`` found by :func:`find_platform`.

    Args:
        platform: Platform name (the manifest's ``platform``).
        target: ``hw`` or ``hw_emu``.
        env: Environment to check (default :data:`os.environ`).
    """
    env = os.environ if env is None else env
    path = env.get("PATH", "")
    problems = []
    if target not in ("hw", "hw_emu"):
        problems.append(f"TARGET must be hw or hw_emu, not {target!r}")
    tools = dict(REQUIRED_TOOLS)
    if target == "hw_emu":
        tools["emconfigutil"] = "writes emconfig.json for hardware emulation"
    for tool, why in tools.items():
        if shutil.which(tool, path=path) is None:
            problems.append(f"`{tool}` not found on PATH ({why})")
    vitis = env.get("XILINX_VITIS", "")
    if not vitis:
        problems.append("XILINX_VITIS is not set (set by Vitis' settings64.sh)")
    elif not Path(vitis).is_dir():
        problems.append(f"XILINX_VITIS={vitis} is not a folder")
    if find_platform(platform, env) is None:
        where = env.get("PLATFORM_REPO_PATHS")
        searched = f"PLATFORM_REPO_PATHS={where}" if where else "PLATFORM_REPO_PATHS is not set"
        problems.append(f"platform {platform}.xpfm not found ({searched}; also searched {', '.join(PLATFORM_DIRS)})")
    return problems


#: the engine's sources in the repository (relative path, what it is); its graph is generated
ENGINE_SOURCES: tuple[tuple[str, str], ...] = (
    ("hw/aie/engine/kernels.h", "the engine's ADF kernel declarations"),
    ("hw/aie/engine/engine_kernels.h", "the engine's kernel logic"),
    ("hw/aie/engine/aie_common.h", "what the engine's and the GEMM's kernels share"),
    ("hw/aie/engine/qk_slice.cc", "AIE kernel qk_slice"),
    ("hw/aie/engine/pv_slice.cc", "AIE kernel pv_slice"),
    ("hw/aie/generated/engine_streams.h", "the engine stream contract header"),
)
#: the projection cascades' kernel sources, which a sublayer's gemm_<stage>.cc include
GEMM_SOURCES: tuple[str, ...] = ("hw/aie/engine/gemm_proj.cc", "hw/aie/engine/gemm_kernels.h")
#: the engine's HLS movers (hw/hls/<name>.cpp)
ENGINE_HLS: tuple[str, ...] = ("mm2s_engine", "s2mm_engine")


def check_engine_sources(root: Path = REPO_ROOT) -> list[str]:
    """Missing sources of an engine build: :data:`ENGINE_SOURCES` and ``hw/hls/<k>.cpp`` for :data:`ENGINE_HLS`."""
    need = list(ENGINE_SOURCES) + [(f"hw/hls/{k}.cpp", f"HLS kernel {k}") for k in ENGINE_HLS]
    return [f"source missing: {rel} ({what})" for rel, what in need if not (root / rel).is_file()]


def format_problems(problems: list[str], platform: str = DEFAULT_PLATFORM) -> str:
    """The multi-line message the flow stops with: what is missing, then how to set the tools up."""
    lines = ["vckattn Vitis build: cannot start, AMD tools or sources are missing:"]
    lines += [f"  - {p}" for p in problems]
    if all(p.startswith("source missing:") for p in problems):
        return "\n".join(lines + ["  (the sources belong to the repository: hw/aie/, hw/hls/)"])
    lines += [
        "How to fix (Vitis 2022.2, the release this build targets; Linux x86-64):",
        "  1. install Vitis 2022.2 (includes Vivado and the AI Engine tools), then in this shell:",
        "       source <Vitis install>/Vitis/2022.2/settings64.sh     # v++, aiecompiler, vivado, XILINX_VITIS",
        "  2. install XRT 2022.2 and source it:",
        "       source /opt/xilinx/xrt/setup.sh                        # xclbinutil, XILINX_XRT",
        f"  3. install the platform package {platform} (AMD's deployment + development",
        "     platform packages for the card; they install under /opt/xilinx/platforms), or point",
        "       export PLATFORM_REPO_PATHS=<folder holding the platform's .xpfm>",
        "  The generated sources need none of this: `vckattn hw generate` writes them (DRY_RUN=1 lists them).",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------- manifest


def read_manifest(manifest: str | Path) -> tuple[dict, Path]:
    """A manifest's JSON object and file, from a name in ``bitstreams/`` or a ``.json`` path (no schema
    validation: the check must stay fast; :func:`record_uuid` validates)."""
    p = Path(manifest)
    if not p.suffix and not p.exists():
        p = BITSTREAMS / f"{p.name}.json"
    try:
        return json.loads(p.read_text(encoding="utf-8")), p
    except (OSError, ValueError) as exc:
        raise FlowError(f"{p}: cannot read the manifest ({exc})") from None


def flow_variables(manifest: dict, manifest_file: Path, xpfm: Path, system_cfg: Path) -> dict[str, str]:
    """The make variables of a checked build (written into the ``--mk`` file); ``system_cfg``: its linker
    configuration (the generated ``system.cfg``)."""
    kinds = {kind: " ".join(k["name"] for k in manifest["kernels"] if k["kind"] == kind) for kind in ("hls", "rtl")}
    mhz = int(manifest["clocks_mhz"]["pl"])
    return {
        "PLATFORM": manifest["platform"],
        "XPFM": str(xpfm),
        "BOARD": manifest["board"],
        "MANIFEST_FILE": str(manifest_file.resolve()),
        "PL_FREQ_MHZ": str(mhz),
        "PL_FREQ_HZ": str(mhz * 1_000_000),
        "HLS_KERNELS": kinds["hls"],
        "RTL_KERNELS": kinds["rtl"],
        "SYSTEM_CFG": str(system_cfg),
    }


# ---------------------------------------------------------------------------------------- UUID


def parse_xclbin_info(text: str) -> tuple[str, list[str] | None]:
    """The UUID (lower case) and kernel names (``None`` when not listed) from ``xclbinutil --info`` text.

    Raises:
        FlowError: no ``UUID (xclbin):`` line.
    """
    mo = _UUID.search(text)
    if mo is None:
        raise FlowError("no `UUID (xclbin): <uuid>` line in the xclbinutil --info output")
    km = _KERNELS.search(text)
    kernels = [k.strip() for k in km.group(1).split(",") if k.strip()] if km else None
    return mo.group(1).lower(), kernels


def _xclbin_info(xclbin: Path) -> str:
    tool = shutil.which("xclbinutil")
    if tool is None:
        raise FlowError("xclbinutil not found on PATH (source /opt/xilinx/xrt/setup.sh)")
    proc = subprocess.run([tool, "--info", "--input", str(xclbin)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise FlowError(f"xclbinutil --info --input {xclbin} failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def record_uuid(manifest: str | Path | dict, xclbin: str | Path, *, info: str | None = None,
                out: str | Path | None = None) -> dict:
    """The manifest with the xclbin's UUID and file name recorded (``xclbin.uuid``, ``xclbin.file``).

    Args:
        manifest: A manifest name in ``bitstreams/``, a ``.json`` path, or the JSON object itself
            (not modified).
        xclbin: The packaged ``.xclbin``.
        info: ``xclbinutil --info`` output; default: run ``xclbinutil --info --input <xclbin>``.
        out: Also write the result there (JSON, indented).

    Raises:
        FlowError: no UUID in the output, or the xclbin lacks a kernel of the manifest.
        vckattn.hw.design.manifest.ManifestError: the result is no valid manifest.
    """
    from vckattn.hw.design.manifest import validate_manifest

    data = json.loads(json.dumps(manifest)) if isinstance(manifest, dict) else read_manifest(manifest)[0]
    xclbin = Path(xclbin)
    uuid, kernels = parse_xclbin_info(_xclbin_info(xclbin) if info is None else info)
    if kernels is not None:
        missing = [k["name"] for k in data["kernels"] if k["name"] not in kernels]
        if missing:
            raise FlowError(f"{xclbin}: kernels {missing} of manifest {data['name']} are not in the xclbin "
                            f"(it has {', '.join(kernels)})")
    data["xclbin"] = {"file": xclbin.name, "uuid": uuid}
    validate_manifest(data, out or "<recorded manifest>")
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


# ---------------------------------------------------------------------------------------- command line


def default_design_file() -> Path:
    """The design file of the committed default design (:func:`vckattn.hw.design.manifest.default_manifest`)."""
    from vckattn.hw.design.manifest import default_manifest

    return DESIGNS / f"{default_manifest()}.design.json"


def board_of(name: str) -> str:
    """The board of design ``name``: a committed best design's (:data:`vckattn.hw.design.manifest.BUILDS`), else
    ``vck5000``."""
    from vckattn.hw.design.manifest import BUILDS

    return BUILDS.get(name, ("vck5000", ""))[0]


def _design_name(design: Path) -> str:
    return design.name.removesuffix(".json").removesuffix(".design")


def _cmd_check(args: argparse.Namespace) -> int:
    if not args.design.is_file():
        raise FlowError(f"DESIGN={args.design}: no such design file")
    board = args.board or board_of(_design_name(args.design))
    if board not in PLATFORMS:
        raise FlowError(f"unknown board {board!r}; choose from {', '.join(PLATFORMS)}")
    problems = check_tools(PLATFORMS[board], target=args.target) + check_engine_sources()
    if problems:
        print(format_problems(problems, PLATFORMS[board]), file=sys.stderr)
        return 1
    return 0


def _sublayer_build(design: Path) -> Any:
    """The sublayer build whose PL top is generated that DESIGN names (a file of that name wins), else None."""
    from vckattn.hw.design.sublayer_build import FULL_SIZE_BUILDS, SUBLAYER_BUILDS, top_generated

    if design.is_file() or design.suffix:
        return None
    b = {**FULL_SIZE_BUILDS, **SUBLAYER_BUILDS}.get(design.name)
    if b is not None and not top_generated(b):
        raise FlowError(f"DESIGN={design}: its PL top is not generated, so no xclbin can be built from it")
    return b


def _cmd_engine(args: argparse.Namespace) -> int:
    from vckattn.hw.design.render import platform_of
    sublayer = _sublayer_build(args.design)
    if sublayer is None and not args.design.is_file():
        raise FlowError(f"DESIGN={args.design}: no such design file or sublayer build")
    board = args.board or (board_of(args.name) if sublayer is None else "vck5000")
    platform = platform_of(board)
    tools = check_tools(platform, target=args.target)
    sources = check_engine_sources()
    if sources or (tools and not args.dry_run):
        print(format_problems(tools + sources, platform), file=sys.stderr)
        return 1
    for p in tools:  # a dry run goes on without the tools: it only prints the commands
        print(f"dry run: {p}", file=sys.stderr)
    import warnings

    from amaranth.hdl import UnusedElaboratable

    from vckattn.hw.design import generate as gen
    from vckattn.hw.design import render
    warnings.simplefilter("ignore", UnusedElaboratable)  # the generator elaborates the PL top to read its ports

    if sublayer is None:
        design = render.design_from_file(args.design)
        gen.generate(design, board, args.out, max_seq=design.max_seq or render.BERT_SEQ, name=args.name)
    else:
        if args.name != sublayer.name:
            raise FlowError(f"--name {args.name}: a sublayer build's name is its own ({sublayer.name})")
        print(f"generating {sublayer.name} (its PL top's Verilog takes minutes)", file=sys.stderr)
        gen.generate_sublayer(sublayer, board, args.out)
    manifest, file = read_manifest(args.out / "manifest.json")
    xpfm = find_platform(platform) or Path(f"<{platform}.xpfm>")  # a placeholder only in a dry run
    out = args.out.resolve()
    variables = flow_variables(manifest, file, xpfm, system_cfg=out / "system.cfg")
    variables.update({
        "AIE_GRAPH": str(out / "aie" / "graph.cpp"),
        "AIE_INCLUDES": " ".join(f"--include={d}" for d in (out / "aie", REPO_ROOT / "hw/aie/engine",
                                                             REPO_ROOT / "hw/aie", REPO_ROOT / "hw/aie/generated")),
        "AIE_DEPS": " ".join(str(p) for p in sorted((out / "aie").glob("*"))),
        "HLS_INCLUDES": f"-I{out / 'aie'} -I{REPO_ROOT / 'hw/aie/generated'}",
        "ENGINE_PL": str(out / "pl"),
        "RTL_XOS": " ".join(str(out / _RTL_FOLDERS.get(k, "pl") / f"{k}.xo")
                            for k in variables["RTL_KERNELS"].split()),
    })
    args.mk.parent.mkdir(parents=True, exist_ok=True)
    args.mk.write_text(f"# written by vckattn.hw.vitis.flow engine for {manifest['name']}\n"
                       + "".join(f"{k} := {v}\n" for k, v in variables.items()))
    if args.dry_run:
        inputs = engine_inputs(variables)
        missing = [p for p in inputs if not Path(p).is_file()]
        for p in inputs:
            print(f"input: {p}" + ("  MISSING" if p in missing else ""))
        if missing:
            print(f"vckattn Vitis build: {len(missing)} input(s) missing: {', '.join(missing)}", file=sys.stderr)
            return 1
    return 0


#: the folder of each RTL kernel's sources in a build folder other than ``pl/`` (a sublayer's PL top)
_RTL_FOLDERS = {"sublayer_pl": "pl_sublayer"}


def engine_inputs(variables: dict[str, str]) -> list[str]:
    """The source files a build's steps read (``variables``: its make variables): the generated graph and its
    headers, the AIE kernels, the HLS movers, every RTL kernel's packaging script and Verilog (the engine's PL top;
    a sublayer's PL top too), the link configuration, the manifest."""
    files = [variables["AIE_GRAPH"], *variables["AIE_DEPS"].split()]
    files += [str(REPO_ROOT / rel) for rel, _ in ENGINE_SOURCES]
    if any(Path(f).name.startswith("gemm_") for f in variables["AIE_DEPS"].split()):  # a sublayer's cascades
        files += [str(REPO_ROOT / rel) for rel in GEMM_SOURCES]
    files += [str(REPO_ROOT / "hw" / "hls" / f"{k}.cpp") for k in variables["HLS_KERNELS"].split()]
    for xo in variables["RTL_XOS"].split():
        pl = Path(xo).parent
        files += [str(pl / "package_kernel.tcl"), str(pl / "kernel.xml"), *(str(p) for p in sorted(pl.glob("*.v")))]
    files += [variables["SYSTEM_CFG"], variables["MANIFEST_FILE"]]
    return list(dict.fromkeys(files))


def _cmd_record_uuid(args: argparse.Namespace) -> int:
    info = args.info.read_text() if args.info is not None else None
    data = record_uuid(args.manifest, args.xclbin, info=info, out=args.out)
    print(f"{args.out}: {data['name']} with xclbin {data['xclbin']['file']} uuid {data['xclbin']['uuid']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command line of ``python -m vckattn.hw.vitis.flow`` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m vckattn.hw.vitis.flow", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="check the AMD tools, the platform and the engine's sources")
    c.add_argument("--design", type=Path, default=default_design_file(),
                   help="design JSON (default: the committed default design's)")
    c.add_argument("--board", default=None, help="vck5000 or vck190 (default: the committed design's board)")
    c.add_argument("--target", default="hw", help="hw or hw_emu")
    c.set_defaults(func=_cmd_check)
    e = sub.add_parser("engine", help="check tools and engine sources, generate the engine, write make variables")
    e.add_argument("--design", type=Path, default=default_design_file(),
                   help="design JSON (vckattn hw generate's DESIGN; default: the committed default design's)")
    e.add_argument("--board", default=None, help="vck5000 or vck190 (default: the committed design's board)")
    e.add_argument("--name", required=True, help="the build's manifest name")
    e.add_argument("--target", default="hw", help="hw or hw_emu")
    e.add_argument("--out", type=Path, required=True, help="folder for the generated sources")
    e.add_argument("--mk", type=Path, required=True, help="write the build's make variables here")
    e.add_argument("--dry-run", action="store_true", help="go on without the AMD tools (the platform a placeholder) "
                   "and list every input of the build, failing if one is missing")
    e.set_defaults(func=_cmd_engine)
    r = sub.add_parser("record-uuid", help="copy the manifest with the xclbin's UUID")
    r.add_argument("--manifest", required=True, help="manifest name in bitstreams/ or .json file (the build's)")
    r.add_argument("--xclbin", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True, help="where to write the manifest copy")
    r.add_argument("--info", type=Path, default=None, help="saved xclbinutil --info output (default: run it)")
    r.set_defaults(func=_cmd_record_uuid)
    args = parser.parse_args(argv)
    from vckattn.golden.errors import UserError  # ManifestError's base; light import

    try:
        return int(args.func(args))
    except (FlowError, UserError) as exc:
        print(f"vckattn Vitis build: {exc}", file=sys.stderr)
        return 1

if __name__ == "__main__":
    sys.exit(main())
