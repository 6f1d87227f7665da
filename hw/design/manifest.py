"""Bitstream manifests: what one hardware build of the attention engine offers the host.

The full description: ``docs/internals/hw.md``, section ``hw/design/manifest.py``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vckattn.golden.bhyt_int import BHYT_EXACT_ID
from vckattn.golden.errors import EXIT_BUNDLE, UserError
from vckattn.golden.regmap import RegisterMap
from vckattn.golden.rope_int import ROPE_ID
from vckattn.golden.sublayer import RESIDUAL_ID
from vckattn.hw.spec.gemm import GemmParams

BITSTREAMS = Path(__file__).resolve().parents[2] / "bitstreams"
SCHEMA_FILE = BITSTREAMS / "manifest_schema.json"
SCHEMA_NAME = "vckattn-bitstream"
SCHEMA_VERSION = 1

#: The Vitis platform of each board (Vitis 2022.2)
PLATFORMS: dict[str, str] = {
    "vck5000": "xilinx_vck5000_gen4x8_qdma_2_202220_1",
    "vck190": "xilinx_vck190_base_202220_1",
}
#: The committed best design per board: what ``run``, ``eval``, ``deploy``, ``board selftest`` and ``perf`` use
#: when no ``--manifest`` is given (the ``pynq`` backend drives a VCK190, every other backend the VCK5000's design).
DEFAULT_DESIGN = "vck5000_engine"
DEFAULT_MANIFEST = {"pynq": "vck190_engine"}
#: The committed best design of each board: manifest name -> (board, platform).
BUILDS: dict[str, tuple[str, str]] = {DEFAULT_DESIGN: ("vck5000", PLATFORMS["vck5000"]),
                                      DEFAULT_MANIFEST["pynq"]: ("vck190", PLATFORMS["vck190"])}


def default_manifest(backend: str | None = None) -> str:
    """The name in ``bitstreams/`` of the committed best design for ``backend`` (None: the VCK5000's)."""
    return DEFAULT_MANIFEST.get(backend or "", DEFAULT_DESIGN)


#: the AI Engine array's clock of every build (MHz)
AIE_CLOCK_MHZ = 1250


class ManifestError(UserError):
    """A manifest that cannot be used, or a bundle/xclbin that does not match it:
    ``"<file>: <field>: <message>"``."""

    exit_code = EXIT_BUNDLE

    def __init__(self, file: str | Path, field: str, message: str) -> None:
        super().__init__(f"{file}: {field}: {message}")
        self.file, self.field, self.message = str(file), field, message


@dataclass(frozen=True)
class TileShape:
    """The hardware tile: ``q_rows`` query rows of one head against all keys, the keys streamed in
    blocks of ``key_block`` (the AIE matmul's K/N tile); ``lanes`` scores per PL beat."""

    q_rows: int
    key_block: int
    lanes: int
    head_dims: tuple[int, ...]


@dataclass(frozen=True)
class EngineSection:
    """A manifest's ``engine`` section: ``pipelines`` pipelines of ``kernels_per_pipeline`` QKᵀ and as
    many P·V kernels and ``score_plios`` score channels, head size ``d`` (``D``), ``max_keys`` keys a group in
    slices of ``slice_keys``, ``score_bits``-bit scores, ``lanes`` SwiftMax lanes per score channel in the RTL
    kernel ``pl_top``; ``design`` is the design point's JSON (:meth:`design_point` rebuilds it)."""

    pipelines: int
    kernels_per_pipeline: int
    score_plios: int
    d: int
    max_keys: int
    slice_keys: int
    score_bits: int
    lanes: int
    pl_top: str
    design: dict
    streams_version: int

    @property
    def channels(self) -> int:
        """Score channels ``pipelines · score_plios``: the PL top's stream pairs
        (:class:`vckattn.hw.pl.engine.EnginePL`)."""
        return self.pipelines * self.score_plios

    def design_point(self) -> Any:
        """The :class:`vckattn.hw.perf.model.Design` the engine was generated from."""
        from vckattn.hw.perf.model import design_from_json

        return design_from_json(dict(self.design))


@dataclass(frozen=True)
class Manifest:
    """A loaded, validated manifest (``data`` is the JSON object; ``file`` where it came from)."""

    data: dict
    file: Path

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def tile(self) -> TileShape:
        t = self.data["tile"]
        return TileShape(int(t["q_rows"]), int(t["key_block"]), int(t["lanes"]), tuple(int(h) for h in t["head_dims"]))

    @property
    def max_seq_len(self) -> int:
        return int(self.data["max_seq_len"])

    @property
    def engine(self) -> EngineSection | None:
        """The scalable engine's section (every manifest :func:`load_manifest` accepts has one; ``None`` only for a
        :class:`Manifest` built in memory without it)."""
        e = self.data.get("engine")
        if e is None:
            return None
        return EngineSection(int(e["pipelines"]), int(e["kernels_per_pipeline"]), int(e["score_plios"]), int(e["d"]),
                             int(e["max_keys"]), int(e["slice_keys"]), int(e["score_bits"]), int(e["lanes"]),
                             str(e["pl_top"]), dict(e["design"]), int(e["streams"]["version"]))

    @property
    def uuid(self) -> str | None:
        return self.data["xclbin"]["uuid"]

    @property
    def kernel_names(self) -> list[str]:
        return [k["name"] for k in self.data["kernels"]]

    def kernel(self, name: str) -> dict:
        for k in self.data["kernels"]:
            if k["name"] == name:
                return k
        raise ManifestError(self.file, "kernels", f"no kernel named {name!r} (have {', '.join(self.kernel_names)})")

    def normalizer_kernel(self, normalizer: str) -> dict:
        """The PL kernel implementing ``normalizer`` ("swiftmax" or "softmax")."""
        for k in self.data["kernels"]:
            if k.get("normalizer") == normalizer or normalizer in k.get("normalizers", ()):
                return k
        raise ManifestError(self.file, "kernels", f"this build has no {normalizer} normalizer kernel")

    def regmap(self, kernel: str) -> RegisterMap:
        """The register map of ``kernel`` as this manifest records it (the kernel's declaration, rebuilt)."""
        try:
            return RegisterMap.from_describe(self.kernel(kernel)["registers"])
        except (ValueError, KeyError) as exc:
            raise ManifestError(self.file, f"kernels.{kernel}.registers", str(exc)) from None

    def register_offset(self, kernel: str, register: str) -> int:
        for r in self.kernel(kernel)["registers"]:
            if r["name"] == register:
                return int(r["offset"])
        raise ManifestError(self.file, f"kernels.{kernel}.registers", f"no register {register!r}")


# ---------------------------------------------------------------------------------------- generation


def describe_registers(regmap: Any) -> list[dict]:
    keep = ("name", "kind", "offset", "width", "signed", "access", "doc", "value", "reset", "depth", "read_ports")
    return [{k: e[k] for k in keep if k in e} for e in regmap.describe()]


# ---------------------------------------------------------------------------------------- loading


@functools.cache
def _validator() -> Any:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _field(path: Any) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def validate_manifest(data: Any, file: str | Path = "<manifest>") -> None:
    """Raise :class:`ManifestError` naming the first problem (schema, then cross-field checks)."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: (len(e.absolute_path), list(e.absolute_path)))
    if errors:
        e = errors[0]
        raise ManifestError(file, _field(e.absolute_path), e.message[:200])
    t = data["tile"]
    if t["q_rows"] % t["lanes"] or t["key_block"] % t["lanes"]:
        raise ManifestError(file, "tile", "q_rows and key_block must be multiples of lanes")
    if data["max_seq_len"] % t["key_block"]:
        raise ManifestError(file, "max_seq_len", f"must be a multiple of tile.key_block ({t['key_block']})")
    os_lanes = int(data["engine"].get("lanes_online_softmax", 0))
    if "online_softmax" in data["formats"] and data["formats"]["online_softmax"]["block"] != os_lanes:
        raise ManifestError(file, "formats.online_softmax.block",
                            "must equal the online-softmax lanes (the kernel's block size: "
                            "engine.lanes_online_softmax)")
    names = [k["name"] for k in data["kernels"]]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ManifestError(file, "kernels", f"duplicate kernel names {dup}")
    for norm in data["normalizers"]:
        if not any(k.get("normalizer") == norm or norm in k.get("normalizers", ()) for k in data["kernels"]):
            raise ManifestError(file, "normalizers", f"{norm!r} has no kernel")
    if "softmax" in data["normalizers"] and "online_softmax" not in data["formats"]:
        raise ManifestError(file, "formats.online_softmax", "a build with the online-softmax normalizer needs its "
                                                            "format")
    _check_engine(data, file)
    problem = check_stages(data)
    if problem:
        where, _, message = problem.partition(": ")
        raise ManifestError(file, where, message)
    if "sublayer" in data:
        problem = check_sublayer_section(data)
        if problem:
            where, _, message = problem.partition(": ")
            raise ManifestError(file, where, message)
    _check_connectivity(data, file)


def gemm_memory_problem(g: GemmParams, board: str = "vck5000") -> str | None:
    """Why the cascade ``g`` does not fit an AIE tile (None: it fits): its largest kernel's data memory
    (:meth:`GemmParams.data_bytes`, the kernel's buffers and state) plus the runtime's reserve (stack and heap,
    ``hw/perf/device.json``) against the tile's data memory -- the same budget as the engine's kernels."""
    from vckattn.hw.perf.model import load_device

    dev = load_device(board)
    need = g.data_bytes() + dev.tile_memory_reserve_bytes
    if need <= dev.tile_memory_bytes:
        return None
    return (f"buffers and state ({g.data_bytes()} B) + runtime reserve ({dev.tile_memory_reserve_bytes} B) exceed the "
            f"{dev.tile_memory_bytes} B of an AIE tile's data memory")


def check_sublayer_section(data: dict) -> str | None:
    """The first problem of a manifest's ``sublayer`` section as ``"field: message"`` (None: consistent): each
    cascade covers ``d_model`` and fits a kernel's memory, the family's units are there with the declared register
    maps and IDs."""
    s = data["sublayer"]
    for name in ("qkv", "o"):
        g = GemmParams(**s["gemm"][name])
        if g.k != s["d_model"]:
            return (f"sublayer.gemm.{name}: {g.kernels} kernels of {g.slices_text()} "
                    f"features ({g.k}) is not d_model {s['d_model']}")
        too_big = gemm_memory_problem(g)
        if too_big:
            return f"sublayer.gemm.{name}: {too_big}"
    if (s["gemm"]["qkv"]["out_bits"], s["gemm"]["o"]["out_bits"]) != (8, 32):
        return "sublayer.gemm: qkv out_bits must be 8 and o out_bits 32"
    want = {"residual"} | ({"bhyt_site", "rope"} if s["family"] == "decoder" else set())
    if set(s["units"]) != want:
        return f"sublayer.units: a {s['family']} build has the units {sorted(want)}, not {sorted(s['units'])}"
    idents = {"residual": RESIDUAL_ID, "bhyt_site": BHYT_EXACT_ID, "rope": ROPE_ID}
    for name, u in s["units"].items():
        if u["id"] != idents[name]:
            return f"sublayer.units.{name}.id: {u['id']:#x} is not the unit's ID {idents[name]:#x}"
    if s["family"] == "decoder" and s["units"]["rope"]["max_pos"] < data["max_seq_len"]:
        return "sublayer.units.rope.max_pos: below max_seq_len"
    return None


def _part(data: dict, by: str) -> Any:
    """The manifest part a stage's ``by`` names (``graph``, ``sublayer.gemm.<cascade>``, ``sublayer.units.<unit>``),
    or None."""
    if by == "graph":
        return data.get("graph")
    parts = by.split(".")
    if len(parts) != 3 or parts[0] != "sublayer" or parts[1] not in ("gemm", "units"):
        return None
    return data.get("sublayer", {}).get(parts[1], {}).get(parts[2])


def check_stages(data: dict) -> str | None:
    """The first problem of a manifest's ``stages`` as ``"field: message"`` (None: consistent): every stage is
    run by a part the manifest has, the stages keep the order of :data:`~vckattn.golden.stages.STAGES` without
    repeats, the attention engine is among them, and a sublayer build places every stage of its family on the
    device."""
    from vckattn.golden.stages import FAMILY_STAGES, STAGES

    names = [s["stage"] for s in data["stages"]]
    order = list(STAGES)
    if len(set(names)) != len(names) or names != sorted(names, key=order.index):
        return f"stages: {names} repeat a stage or leave the order {order}"
    if "attention" not in names:
        return "stages: the attention stage runs on the device in every design"
    for i, s in enumerate(data["stages"]):
        if s["where"] not in STAGES[s["stage"]].places:
            return f"stages.{i}.where: {s['stage']} cannot run on {s['where']}"
        if _part(data, s["by"]) is None:
            return f"stages.{i}.by: {s['by']!r} is not part of this manifest"
    if "sublayer" in data:
        want = list(FAMILY_STAGES[data["sublayer"]["family"]])
        if names != want:
            fam = data["sublayer"]["family"]
            return f"stages: a sublayer build of the {fam} family runs {want} on the device, not {names}"
    return None


def compute_units(kernel: dict) -> list[str]:
    """A manifest kernel's compute unit names (its own name when it has no ``compute_units``)."""
    return list(kernel.get("compute_units") or [kernel["name"]])


def _check_engine(data: dict, file: str | Path) -> None:
    """The ``engine`` section agrees with its design point, the tile and the graph's PLIOs."""
    e, t = data["engine"], data["tile"]
    d = e["design"]
    for key, field in (("pipelines", "pipelines"), ("kernels_per_pipeline", "qk_kernels"),
                       ("kernels_per_pipeline", "pv_kernels"), ("score_plios", "score_plios"),
                       ("score_bits", "score_bits"), ("lanes", "lanes_swiftmax"), ("max_keys", "max_seq")):
        if d.get(field) != e[key]:
            raise ManifestError(file, f"engine.design.{field}", f"{d.get(field)!r} differs from engine.{key} {e[key]}")
    k, m = e["kernels_per_pipeline"], e["score_plios"]
    if k % m:
        raise ManifestError(file, "engine.score_plios", f"{m} does not divide kernels_per_pipeline {k}")
    if e["max_keys"] != data["max_seq_len"] or e["slice_keys"] * k != e["max_keys"] or e["slice_keys"] % 16:
        raise ManifestError(file, "engine.slice_keys", f"{e['slice_keys']} x {k} kernels is not max_keys "
                                                       f"{e['max_keys']} = max_seq_len {data['max_seq_len']} in slices "
                                                       "of a multiple of 16 keys")
    if e["d"] != max(t["head_dims"]) or e["d"] % 16:
        raise ManifestError(file, "engine.d", f"{e['d']} is not the largest of tile.head_dims {t['head_dims']}")
    for key in ("q_rows", "key_block"):
        if d.get(key) != t[key]:
            raise ManifestError(file, f"engine.design.{key}", f"{d.get(key)!r} differs from tile.{key} {t[key]}")
    if e["lanes"] != t["lanes"]:
        raise ManifestError(file, "engine.lanes", f"{e['lanes']} differs from tile.lanes {t['lanes']}")
    os_lanes = int(e.get("lanes_online_softmax", 0))
    if os_lanes != int(d.get("lanes_online_softmax", 0)):
        raise ManifestError(file, "engine.design.lanes_online_softmax", f"{d.get('lanes_online_softmax')!r} differs "
                                                                      f"from engine.lanes_online_softmax {os_lanes}")
    if bool(os_lanes) != ("softmax" in data["normalizers"]):
        raise ManifestError(file, "engine.lanes_online_softmax", f"{os_lanes} online-softmax lanes, but normalizers "
                                                                 f"{data['normalizers']}")
    from vckattn.hw.design.layout import pipeline_plios

    want = {(f"p{i}_{s}", dr) for i in range(e["pipelines"]) for s, dr in pipeline_plios(m)}
    have = {(p["name"], p["direction"]) for p in data["graph"]["plios"]}
    if "pl_top" in data.get("sublayer", {}):  # a generated sublayer's graph: the projection cascades' PLIOs too
        have = {(n, dr) for n, dr in have if not n.startswith(("qkv_", "o_"))}
    if have != want:
        diff = sorted(n for n, _ in have ^ want)[:4]
        raise ManifestError(file, "graph.plios", f"not the engine's PLIOs p<i>_q_in/kv_in/p_in<c>/s_out<c>/o_out "
                                                 f"for {e['pipelines']} pipelines of {m} score channel(s) (differ: "
                                                 f"{', '.join(diff)})")
    if e["pl_top"] not in {k["name"] for k in data["kernels"]}:
        raise ManifestError(file, "engine.pl_top", f"{e['pl_top']!r} is no kernel of this manifest")


def _check_connectivity(data: dict, file: str | Path) -> None:
    """Every ``connectivity`` link joins an output stream to an input stream of the same TDATA width;
    ``ai_engine_0.<plio>`` endpoints are the graph's PLIOs (direction seen from the AIE array)."""
    ends: dict[str, tuple[str, int | None]] = {}
    for k in data["kernels"]:
        for cu in compute_units(k):
            for p in k["ports"]:
                if p["protocol"] == "axis":
                    ends[f"{cu}.{p['name']}"] = (p.get("direction", ""), p.get("tdata_bits"))
    for pl in data["graph"]["plios"]:  # an AIE input is where the PL sends to
        ends[f"ai_engine_0.{pl['name']}"] = ("out" if pl["direction"] == "out" else "in", pl["bits"])
    used: set[str] = set()
    for i, link in enumerate(data["connectivity"]):
        where = f"connectivity.{i}"
        for role, want in (("from", "out"), ("to", "in")):
            end = link[role]
            if end not in ends:
                raise ManifestError(file, f"{where}.{role}", f"{end!r} is no stream port of a kernel or PLIO")
            if ends[end][0] != want:
                raise ManifestError(file, f"{where}.{role}", f"{end!r} is not an {want}put stream")
            if end in used:
                raise ManifestError(file, f"{where}.{role}", f"{end!r} is connected twice")
            used.add(end)
        wa, wb = ends[link["from"]][1], ends[link["to"]][1]
        if wa and wb and wa != wb:
            raise ManifestError(file, where, f"{link['from']} ({wa} bit) and {link['to']} ({wb} bit) differ in width")
    loose = sorted(set(ends) - used)
    if loose:
        raise ManifestError(file, "connectivity", f"stream ports left unconnected: {', '.join(loose)}")


def load_manifest(path: str | Path) -> Manifest:
    """Load and validate a manifest file, or a build name from ``bitstreams/`` (``"vck5000_engine"``)."""
    p = Path(path)
    if not p.suffix and not p.exists():
        p = BITSTREAMS / f"{p.name}.json"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(p, "(file)", f"cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ManifestError(p, "(file)", f"not valid JSON: {exc}") from None
    validate_manifest(data, p)
    return Manifest(data, p)


def check_bundle(manifest: Manifest, bundle: Any, layers: list[int] | None = None, seq_len: int | None = None) -> None:
    """Refuse a bundle (and a sequence length) this build cannot run, naming the mismatch.

    Checks: head size among the tile's ``head_dims``; the model's heads within the SwiftMax kernel's register
    sets (``max_heads``); every requested layer's normalizer built in;
    the bundle's SwiftMax / online-softmax formats equal to the build's (else the kernels would compute
    something else than the golden model the bundle was exported for; an engine build's SwiftMax input
    width is its score width, and each layer needs its ``score_absmax``); ``seq_len`` within
    ``max_seq_len``.
    """
    m = bundle.manifest
    where = manifest.file
    hd = int(m["model"]["head_dim"])
    if hd not in manifest.tile.head_dims:
        raise ManifestError(where, "tile.head_dims",
                            f"the bundle's head_dim {hd} is not supported by this build "
                            f"(supports {manifest.tile.head_dims})")
    eng = manifest.data.get("engine")
    for fmt_name in manifest.data["formats"]:  # the formats this build's kernels have
        got, want = dict(m["formats"][fmt_name]), dict(manifest.data["formats"][fmt_name])
        if eng and fmt_name == "swiftmax":
            # an engine's SwiftMax takes the narrow scores (acc_bits = score_bits, golden/engine.py: engine_format);
            # the host narrows the bundle's int32-score layer (narrow_layer), every other field must match
            got.pop("acc_bits", None)
            want.pop("acc_bits", None)
        if fmt_name == "swiftmax":  # register sets the build holds (a build parameter, not a numeric format)
            heads, max_heads = int(m["model"]["num_heads"]), want.pop("max_heads", 1)
            got.pop("max_heads", None)
            if "swiftmax" in manifest.data["normalizers"] and heads > max_heads:
                raise ManifestError(where, "formats.swiftmax.max_heads",
                                    f"the bundle's model has {heads} heads; this build's SwiftMax kernel holds "
                                    f"{max_heads} register sets (one per head)")
        if got != want:
            diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            raise ManifestError(where, f"formats.{fmt_name}",
                                f"the bundle was exported for a different {fmt_name} format (fields {diff} differ)")
    wanted = set(layers) if layers is not None else None
    for e in m["layers"]:
        if wanted is not None and int(e["index"]) not in wanted:
            continue
        norm = "swiftmax" if e.get("swiftmax") is not None else "softmax"
        if norm not in manifest.data["normalizers"]:
            having = [c.name for c in committed_manifests() if norm in c.data["normalizers"]]
            raise ManifestError(where, "normalizers", f"layer {e['index']} needs {norm}, which this build lacks "
                                f"(committed builds with it: {', '.join(having) or 'none'}; --manifest NAME)")
        if eng and e.get("score_absmax") is None:
            raise ManifestError(where, "engine.score_bits",
                                f"layer {e['index']} of the bundle has no score_absmax (the calibration |Q·Kᵀ| maximum "
                                f"that sets the engine's {eng['score_bits']}-bit score shift): re-export it with "
                                "this version of vckattn")
    if seq_len is not None and seq_len > manifest.max_seq_len:
        raise ManifestError(where, "max_seq_len",
                            f"sequence of {seq_len} tokens is longer than this build's maximum {manifest.max_seq_len}")


def committed_manifests(folder: Path = BITSTREAMS) -> list[Manifest]:
    """Every committed build's manifest (``bitstreams/*.json`` but the schema), by name."""
    return [load_manifest(f) for f in sorted(folder.glob("*.json")) if f != SCHEMA_FILE]


def _runs(m: Manifest, head_dim: int, heads: int, normalizers: set[str], seq_len: int | None) -> list[str]:
    """Why build ``m`` cannot run a model of this shape (empty: it can)."""
    why = []
    if head_dim not in m.tile.head_dims:
        why.append(f"head size {head_dim}")
    max_heads = int(m.data["formats"].get("swiftmax", {}).get("max_heads", heads))
    if "swiftmax" in normalizers and heads > max_heads:
        why.append(f"{heads} heads")
    lacking = sorted(n for n in normalizers if n not in m.data["normalizers"])
    if lacking:
        why.append(f"normalizer {', '.join(lacking)}")
    if seq_len is not None and seq_len > m.max_seq_len:
        why.append(f"{seq_len} tokens")
    return why


def runnable_problem(head_dim: int, heads: int, normalizers: set[str], seq_len: int | None = None,
                     manifests: list[Manifest] | None = None) -> str | None:
    """None when at least one committed build (``manifests``, default :func:`committed_manifests`) runs attention
    layers of this shape — ``head_dim``, ``heads`` query heads, these normalizers (``swiftmax`` / ``softmax``),
    sequences of ``seq_len`` tokens (None: not asked) — else one line saying what does not run and listing what
    each build runs."""
    builds = manifests if manifests is not None else committed_manifests()
    if any(not _runs(m, head_dim, heads, normalizers, seq_len) for m in builds):
        return None
    asked = min((_runs(m, head_dim, heads, normalizers, seq_len) for m in builds), key=len)  # the nearest build
    offers: dict[str, list[str]] = {}
    for m in builds:
        what = (f"head sizes {', '.join(map(str, m.tile.head_dims))}, up to "
                f"{m.data['formats'].get('swiftmax', {}).get('max_heads', '?')} heads, up to {m.max_seq_len} tokens, "
                f"{' and '.join(m.data['normalizers'])}")
        offers.setdefault(what, []).append(m.name)
    listed = "; ".join(f"{', '.join(names)}: {what}" for what, names in offers.items())
    which = "no committed hardware build" if manifests is None else "none of the given hardware builds"
    return f"{which} runs {' with '.join(asked)} (what runs: {listed})"


__all__ = ["AIE_CLOCK_MHZ", "BITSTREAMS", "BUILDS", "DEFAULT_DESIGN", "DEFAULT_MANIFEST", "EngineSection",
           "Manifest", "ManifestError", "PLATFORMS", "TileShape", "check_bundle", "committed_manifests",
           "compute_units", "default_manifest", "describe_registers", "gemm_memory_problem", "load_manifest",
           "runnable_problem", "validate_manifest"]
