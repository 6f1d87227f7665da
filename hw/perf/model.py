"""Block-level performance model of the attention block on the XCVC1902 (VCK5000 / VCK190).

The full description: ``docs/internals/hw.md``, section ``hw/perf/model.py``.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from vckattn.hw.pl import timing

from . import engine, pl

DEVICE_FILE = Path(__file__).with_name("device.json")
NORMALIZERS: tuple[str, ...] = ("swiftmax", "online_softmax")
#: aliases accepted for a layer's normalizer (bundles and manifests say "softmax")
NORMALIZER_ALIASES = {"softmax": "online_softmax", "online-softmax": "online_softmax"}
NORM_SITES: tuple[str, ...] = ("bhyt_approx", "rmsnorm", "layernorm")
#: the PL kernel that models each norm site (LayerNorm: an RMSNorm-like unit; its mean pass is not modeled)
NORM_SITE_KERNEL = {"bhyt_approx": "bhyt_approx", "rmsnorm": "rmsnorm", "layernorm": "rmsnorm"}
OPERANDS: tuple[str, ...] = ("ddr", "host", "on_chip")
SCORE_BITS: tuple[int, ...] = (8, 16, 32)
PLIO_BITS: tuple[int, ...] = (32, 64, 128)
#: score widths the engine's QK^T kernels write (the AIE's shift-round-saturate) and its PLIO width: what the model
#: costs (``hw/design/generate.py`` refuses the same designs when generating one)
ENGINE_SCORE_BITS: tuple[int, ...] = (8, 16)
ENGINE_PLIO_BITS = 128
#: stage name -> label, in stream order
STAGES: dict[str, str] = {
    "host_link": "host <-> card (PCIe)",
    "norm_site": "PL norm site",
    "ddr": "DDR (one bank)",
    "kv_in": "K/V slices -> AIE (k_in, v_in)",
    "q_in": "Q -> AIE",
    "aie_qk": "AIE QK^T",
    "pl_channel": "score channel (PLIO out, PL, PLIO back)",
    "aie_pv": "AIE P.V",
    "aie_rq": "AIE requantizer",
    "o_out": "A -> PL",
    "s2mm": "PL output mover",
    "host": "host overhead",
}
OPS_PER_MAC = 2


# ---------------------------------------------------------------------------------------------- device


@dataclass(frozen=True)
class Device:
    """The limits the model uses (units in the field names; sources in ``device.json``)."""

    name: str
    board: str
    aie_tiles: int
    aie_clock_hz: float
    macs_per_cycle: dict[str, int]
    tile_memory_bytes: int
    tile_memory_reserve_bytes: int
    stream_bytes_per_cycle: int
    cascade_bytes_per_cycle: int
    plio_usable_128: dict[str, int]
    plio_max_pl_clock_fraction: float
    pl: dict[str, float]
    uram_bits: int
    uram_width_bits: int
    pl_clock_mhz: dict[str, float]
    ddr_bytes_per_s: float
    pcie_bytes_per_s: float | None
    host_seconds_per_launch: float

    @property
    def peak_int8_ops(self) -> float:
        """Peak int8 ops/s of the whole array (2 ops per MAC)."""
        return self.aie_tiles * self.macs_per_cycle["int8"] * OPS_PER_MAC * self.aie_clock_hz

    def peak_ops(self, dtype: str) -> float:
        return self.aie_tiles * self.macs_per_cycle[dtype] * OPS_PER_MAC * self.aie_clock_hz

    def plio_available(self, plio_bits: int) -> dict[str, int]:
        """Usable PLIOs of ``plio_bits`` per direction: a 128-bit PLIO takes two 64-bit interface ports (the
        usable 128-bit counts), a 64-bit or 32-bit PLIO one port each (a 32-bit PLIO does not share its port)."""
        if plio_bits == 128:
            return dict(self.plio_usable_128)
        return {k: int(v * 2) for k, v in self.plio_usable_128.items()}

    def to_json(self) -> dict:
        return {"name": self.name, "board": self.board, "aie_tiles": self.aie_tiles,
                "aie_clock_mhz": self.aie_clock_hz / 1e6, "peak_int8_tops": self.peak_int8_ops / 1e12,
                "ddr_gbps": self.ddr_bytes_per_s / 1e9,
                "pcie_gbps": None if self.pcie_bytes_per_s is None else self.pcie_bytes_per_s / 1e9,
                "source": str(DEVICE_FILE.name)}


def _v(entry: dict) -> Any:
    return entry["value"]


@functools.cache
def device_data() -> dict:
    """The parsed ``device.json``."""
    return json.loads(DEVICE_FILE.read_text(encoding="utf-8"))


@functools.cache
def load_device(board: str = "vck5000") -> Device:
    """The :class:`Device` of ``board`` ("vck5000" or "vck190")."""
    boards = device_data()["devices"]
    if board not in boards:
        raise ValueError(f"unknown board {board!r}; choose from {', '.join(boards)}")
    d = boards[board]
    pcie = _v(d["pcie_gbps"])
    return Device(
        name=d["name"], board=board, aie_tiles=int(_v(d["aie_tiles"])),
        aie_clock_hz=float(_v(d["aie_clock_mhz"])) * 1e6, macs_per_cycle=dict(_v(d["macs_per_cycle"])),
        tile_memory_bytes=int(_v(d["tile_data_memory_bytes"])),
        tile_memory_reserve_bytes=int(_v(d["tile_memory_reserve_bytes"])),
        stream_bytes_per_cycle=int(_v(d["core_stream_bytes_per_cycle"])),
        cascade_bytes_per_cycle=int(_v(d["cascade_bytes_per_cycle"])),
        plio_usable_128=dict(_v(d["plio_usable_128bit"])),
        plio_max_pl_clock_fraction=float(_v(d["plio_max_pl_clock_fraction"])),
        pl={k: float(_v(v)) for k, v in d["pl"].items()}, uram_bits=int(_v(d["uram_bits"])),
        uram_width_bits=int(_v(d["uram_width_bits"])), pl_clock_mhz=dict(_v(d["pl_clock_mhz"])),
        ddr_bytes_per_s=float(_v(d["ddr_gbps"])) * 1e9,
        pcie_bytes_per_s=None if pcie is None else float(pcie) * 1e9,
        host_seconds_per_launch=float(_v(d["host_seconds_per_launch"])),
    )


# -------------------------------------------------------------------------------------------- workload


def normalizer_name(name: str) -> str:
    """The PL kernel name of a layer's normalizer ("softmax" -> "online_softmax")."""
    n = NORMALIZER_ALIASES.get(name, name)
    if n not in NORMALIZERS:
        raise ValueError(f"unknown normalizer {name!r}; choose from swiftmax, online_softmax (softmax)")
    return n


@dataclass(frozen=True)
class Workload:
    """The attention block's work: ``batch`` sequences of ``seq`` tokens, ``heads`` query heads of
    ``d_head`` (``kv_heads`` K/V heads, grouped-query attention when fewer), one entry of ``layers``
    (the normalizer) per layer, an optional pre-norm site before attention, and where the operands
    live (``operands``: "ddr", "host" or "on_chip"; see the module docstring)."""

    heads: int
    d_head: int
    seq: int
    batch: int = 1
    layers: tuple[str, ...] = ("swiftmax",)
    kv_heads: int | None = None
    norm_site: str | None = None
    hidden: int | None = None
    operands: str = "ddr"
    causal: bool = False
    name: str = ""

    def __post_init__(self) -> None:
        for f in ("heads", "d_head", "seq", "batch"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"{f} must be >= 1")
        if not self.layers:
            raise ValueError("a workload needs at least one layer")
        object.__setattr__(self, "layers", tuple(normalizer_name(n) for n in self.layers))
        if self.kv_heads is not None and (self.kv_heads < 1 or self.heads % self.kv_heads):
            raise ValueError("kv_heads must divide heads")
        if self.norm_site is not None and self.norm_site not in NORM_SITES:
            raise ValueError(f"unknown norm site {self.norm_site!r}; choose from {', '.join(NORM_SITES)}")
        if self.operands not in OPERANDS:
            raise ValueError(f"operands must be one of {', '.join(OPERANDS)}")

    @property
    def n_kv_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def hidden_size(self) -> int:
        return self.hidden or self.heads * self.d_head

    @property
    def ops_per_layer(self) -> float:
        """Useful int8 ops of QKᵀ + P·V in one layer: 2 matmuls x 2 ops/MAC x batch·heads·seq²·d_head."""
        return 2.0 * OPS_PER_MAC * self.batch * self.heads * self.seq * self.seq * self.d_head

    @property
    def normalizers(self) -> tuple[str, ...]:
        """The distinct normalizers of the layers, in first-use order."""
        return tuple(dict.fromkeys(self.layers))

    def to_json(self) -> dict:
        return {"name": self.name, "heads": self.heads, "kv_heads": self.n_kv_heads, "d_head": self.d_head,
                "seq": self.seq, "batch": self.batch, "layers": len(self.layers),
                "normalizers": list(self.layers), "norm_site": self.norm_site, "hidden": self.hidden_size,
                "operands": self.operands, "causal": self.causal, "ops_per_layer": self.ops_per_layer}


def workload_from_flags(heads: int, d_head: int, seq: int, batch: int = 1, layers: int = 1,
                        normalizer: str | list[str] = "swiftmax", **kw: Any) -> Workload:
    """A workload of ``layers`` layers, all with ``normalizer`` (or one normalizer per layer)."""
    norms = [normalizer] * layers if isinstance(normalizer, str) else list(normalizer)
    if len(norms) != layers:
        raise ValueError(f"{len(norms)} normalizers for {layers} layers")
    return Workload(heads=heads, d_head=d_head, seq=seq, batch=batch, layers=tuple(norms), **kw)


def workload_from_hf_config(config: dict, seq: int | None = None, batch: int = 1,
                            normalizer: str = "swiftmax", layers: int | None = None, **kw: Any) -> Workload:
    """A workload from a Hugging Face ``config.json`` (BERT/ViT: post-norm, no pre-norm site;
    Llama-style (``rms_norm_eps``): an RMSNorm site before attention)."""
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    if heads < 1 or hidden < 1:
        raise ValueError(f"num_attention_heads {heads} and hidden_size {hidden} must be >= 1")
    if not config.get("head_dim") and hidden % heads:
        raise ValueError(f"hidden_size {hidden} is not a multiple of num_attention_heads {heads} (and no head_dim "
                         "is given): not a model this toolkit can run")
    d_head = int(config.get("head_dim") or hidden // heads)
    n_layers = int(layers or config["num_hidden_layers"])
    seq = int(seq or config.get("max_position_embeddings") or 512)
    decoder = "rms_norm_eps" in config
    norm_site = kw.pop("norm_site", "rmsnorm" if decoder else None)
    return Workload(heads=heads, d_head=d_head, seq=seq, batch=batch, layers=(normalizer,) * n_layers,
                    kv_heads=config.get("num_key_value_heads"), norm_site=norm_site, hidden=hidden,
                    causal=kw.pop("causal", decoder), name=str(config.get("model_type", "")), **kw)


def workload_from_bundle_info(model: dict, layer_normalizers: list[str], norm: str | None, seq: int | None = None,
                              batch: int = 1, **kw: Any) -> Workload:
    """A workload from a bundle's plain numbers (the host reads the bundle): its ``model`` dimensions,
    each layer's normalizer and its norm ("bhyt" -> the BHyT approximate-variance site, "rmsnorm" ->
    RMSNorm, "layernorm" of a pre-norm (Llama) family -> LayerNorm; BERT/ViT are post-norm: none)."""
    family = model.get("family")
    site = None
    if family == "llama":
        site = {"bhyt": "bhyt_approx", "rmsnorm": "rmsnorm", "layernorm": "layernorm"}.get(norm or "", None)
    elif norm == "bhyt":
        site = "bhyt_approx"
    return Workload(heads=int(model["num_heads"]), d_head=int(model["head_dim"]),
                    seq=int(seq or model["max_seq_len"]), batch=batch, layers=tuple(layer_normalizers),
                    kv_heads=int(model["num_kv_heads"]), norm_site=kw.pop("norm_site", site),
                    hidden=int(model["hidden_size"]), causal=kw.pop("causal", family == "llama"),
                    name=str(family or ""), **kw)


BERT_BASE = {"heads": 12, "d_head": 64, "layers": 12}


# ---------------------------------------------------------------------------------------------- design


@dataclass(frozen=True)
class Design:
    """A design point of the engine (see the module docstring for the structure).

    ``lanes_swiftmax`` / ``lanes_online_softmax``: lanes of each normalizer instance (one instance
    per score channel per pipeline; 0 = that normalizer is not built). ``swiftmax_products``: how the SwiftMax lanes
    multiply (:data:`~vckattn.hw.perf.pl.SWIFTMAX_PRODUCTS`: ``"auto"`` LUTs for 8-bit scores, ``"dsp"`` a DSP
    block; the same function). ``score_bits``: the scores the QKᵀ kernels write; ``kv_resident``: the kernels keep
    their K/V slices (the model costs 8- or 16-bit scores, resident K/V and 128-bit PLIOs: :func:`check_engine`).
    ``o_bits``: width of the output leaving the AIE array (8: int8 A, requantized by the kernel at the end of the P·V
    cascade). ``key_block``, ``plio_bits``,
    ``in_plios``, ``out_plios``: the build's tile key block and its PLIOs (128-bit; Q, K, V in and A out a pipeline),
    as its manifest records them. ``host_launches_per_layer``: serial launch overheads. ``max_seq`` / ``head_dim``:
    the keys and head size the kernels are built for (None: the workload's, rounded up as a build would).
    """

    pipelines: int = 1
    qk_kernels: int = 1
    pv_kernels: int = 1
    q_rows: int = 32
    key_block: int = 32
    score_bits: int = 8
    plio_bits: int = 128
    score_plios: int = 1
    in_plios: int = 3
    out_plios: int = 1
    lanes_swiftmax: int = 4
    lanes_online_softmax: int = 4
    swiftmax_products: str = "auto"
    norm_lanes: int = 4
    pl_clock_mhz: float = 250.0
    kv_resident: bool = True
    o_bits: int = 8
    host_launches_per_layer: int = 1
    max_seq: int | None = None
    head_dim: int | None = None
    name: str = ""

    def __post_init__(self) -> None:
        for f in ("pipelines", "qk_kernels", "pv_kernels", "q_rows", "key_block", "score_plios", "in_plios",
                  "out_plios", "norm_lanes"):
            if int(getattr(self, f)) < 1:
                raise ValueError(f"{f} must be >= 1")
        if self.score_bits not in SCORE_BITS:
            raise ValueError(f"score_bits must be one of {SCORE_BITS}")
        if self.plio_bits not in PLIO_BITS:
            raise ValueError(f"plio_bits must be one of {PLIO_BITS}")
        if self.score_plios > self.qk_kernels:
            raise ValueError("score_plios must be <= qk_kernels (every score PLIO needs a QK^T kernel feeding it)")
        if self.lanes_swiftmax < 0 or self.lanes_online_softmax < 0:
            raise ValueError("lanes must be >= 0")
        if self.swiftmax_products not in pl.SWIFTMAX_PRODUCTS:
            raise ValueError(f"swiftmax_products must be one of {', '.join(pl.SWIFTMAX_PRODUCTS)}")
        if not self.pl_clock_mhz > 0:
            raise ValueError("pl_clock_mhz must be > 0")
        if self.o_bits not in (8, 16, 32):
            raise ValueError("o_bits must be 8, 16 or 32")
        if self.head_dim is not None and (self.head_dim < 16 or self.head_dim % 16):
            raise ValueError("head_dim must be a positive multiple of 16")

    def lanes(self, normalizer: str) -> int:
        return self.lanes_swiftmax if normalizer_name(normalizer) == "swiftmax" else self.lanes_online_softmax

    @property
    def aie_kernels(self) -> int:
        return self.pipelines * (self.qk_kernels + self.pv_kernels)

    def to_json(self) -> dict:
        return asdict(self)


def design_from_json(data: dict) -> Design:
    """A :class:`Design` from its JSON (unknown keys are an error)."""
    names = {f.name for f in fields(Design)}
    extra = set(data) - names
    if extra:
        raise ValueError(f"unknown design fields: {', '.join(sorted(extra))}")
    return Design(**data)


def design_from_manifest(manifest: dict) -> Design:
    """The design point of a committed engine build (a bitstream manifest's ``engine.design``, with the build's
    head size and keys); ValueError for a manifest without an ``engine`` section."""
    eng = manifest.get("engine")
    if not eng:
        raise ValueError(f"{manifest.get('name', 'the manifest')} is not an engine build (no engine section): the "
                         "model costs the engine's designs")
    d = design_from_json(dict(eng["design"]))
    return replace(d, head_dim=d.head_dim or int(eng["d"]), max_seq=d.max_seq or int(eng["max_keys"]))


# ------------------------------------------------------------------------------------ sub-model caches


@functools.lru_cache(maxsize=4096)
def kernel_fit(kernel: str, lanes: int, score_bits: int,
               products: str = "auto") -> tuple[float, float, float, float, float]:
    """LUT, FF, DSP, BRAM and URAM of one PL kernel instance of ``lanes`` lanes from its Yosys fit
    (:func:`.pl.resources`; a normalizer at ``score_bits``-bit scores, SwiftMax's products in LUTs or DSPs)."""
    if kernel in NORMALIZERS:
        r = pl.resources(kernel, lanes, score_bits, products if kernel == "swiftmax" else "auto")
    else:
        r = pl.resources(kernel, lanes)
    return (float(r["lut"]), float(r["ff"]), float(r["dsp"]), float(r["bram"]), float(r.get("uram", 0.0)))


@functools.lru_cache(maxsize=4096)
def _epc(kernel: str, lanes: int) -> float:
    return float(timing.elements_per_cycle(kernel, lanes))


RESOURCE_KEYS = ("lut", "ff", "dsp", "bram", "uram")


# ---------------------------------------------------------------------------------------------- result


@dataclass
class Stage:
    """One stage: ``seconds`` it is busy per layer, what bounds it, and its first-unit latency."""

    name: str
    seconds: float
    bound_by: str
    latency_s: float = 0.0
    on_chip: bool = True

    def to_json(self) -> dict:
        return {"name": self.name, "label": STAGES[self.name], "seconds": self.seconds, "bound_by": self.bound_by,
                "first_unit_latency_s": self.latency_s}


@dataclass
class Perf:
    """The model's answer for one workload on one design (all times modeled, in seconds)."""

    device: Device
    workload: Workload
    design: Design
    stages: list[Stage]
    seconds_per_layer: float
    layer_seconds: list[dict]
    tops: float
    fraction_of_peak: float
    tops_on_chip: float
    bottleneck: str
    used: dict[str, float]
    available: dict[str, float]
    traffic: dict[str, float] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    host_serial_seconds: float = 0.0
    kernels: list[dict] = field(default_factory=list)
    #: the host's side of one layer as the host code does it (priced by :mod:`.host_cost`, counted by
    #: vckattn.host.launch_counts); None with ``end_to_end_refused``
    end_to_end: Any = None
    end_to_end_refused: str = ""
    #: the card's time per layer once the operands are in its DDR (the host's syncs are serial and counted apart)
    end_to_end_device_seconds: float = 0.0

    @property
    def end_to_end_seconds_per_layer(self) -> float | None:
        """The card's time (operands in its DDR) plus the host's counted calls, their PCIe bytes and the host's own
        operations per layer, all serial as the host issues them (None when the host cannot launch the layer on the
        design)."""
        return None if self.end_to_end is None else self.end_to_end_device_seconds + self.end_to_end.seconds

    @property
    def device_seconds_per_layer(self) -> float:
        """Seconds per layer on the card, from launch to the last result in DDR (without the host's serial
        launch overhead)."""
        return self.seconds_per_layer - self.host_serial_seconds

    @property
    def ddr_roof_seconds(self) -> float:
        """The DDR roof of the attention block: Q, K, V read and A written once each, ``4·B·H·S·d`` bytes, at the
        bank's bandwidth (the least time any design that keeps its operands in DDR needs)."""
        w = self.workload
        return 4 * w.batch * w.heads * w.seq * w.d_head / self.device.ddr_bytes_per_s

    @property
    def over(self) -> list[str]:
        """The resources used beyond what is available."""
        return [k for k, v in self.used.items() if v > self.available.get(k, math.inf) * (1 + 1e-12)]

    @property
    def fits(self) -> bool:
        return not self.over

    @property
    def lut_headroom(self) -> float:
        """1 - LUT used / LUT available."""
        return 1.0 - self.used["lut"] / self.available["lut"]

    @property
    def seconds_total(self) -> float:
        return self.seconds_per_layer * len(self.workload.layers)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def to_json(self) -> dict:
        return {
            "modeled": True,
            "device": self.device.to_json(),
            "workload": self.workload.to_json(),
            "design": self.design.to_json(),
            "stages": [s.to_json() for s in self.stages],
            "pipelining": PIPELINING,
            "seconds_per_layer": self.seconds_per_layer,
            "seconds_total": self.seconds_total,
            "layers": self.layer_seconds,
            "tops": self.tops,
            "fraction_of_peak": self.fraction_of_peak,
            "tops_on_chip": self.tops_on_chip,
            "fraction_of_peak_on_chip": self.tops_on_chip * 1e12 / self.device.peak_int8_ops,
            "bottleneck": self.bottleneck,
            "resources": {"used": self.used, "available": self.available, "fits": self.fits, "over": self.over,
                          "lut_headroom": self.lut_headroom},
            "traffic_bytes_per_layer": self.traffic,
            "device_seconds_per_layer": self.device_seconds_per_layer,
            "host_serial_seconds_per_layer": self.host_serial_seconds,
            "fraction_of_peak_device": self.workload.ops_per_layer / self.device_seconds_per_layer
            / self.device.peak_int8_ops,
            "ddr_roof": {"seconds": self.ddr_roof_seconds,
                         "fraction_of_roof": self.ddr_roof_seconds / self.seconds_per_layer,
                         "fraction_of_roof_device": self.ddr_roof_seconds / self.device_seconds_per_layer,
                         "definition": "ops / (4·B·H·S·d bytes / DDR bandwidth) against the layer's time"},
            "kernels": self.kernels,
            "assumptions": self.assumptions,
            "end_to_end": None if self.end_to_end is None else {
                **self.end_to_end.to_json(), "device_seconds_per_layer": self.end_to_end_device_seconds,
                "end_to_end_seconds_per_layer": self.end_to_end_seconds_per_layer,
                "fraction_of_peak_end_to_end": self.workload.ops_per_layer / self.end_to_end_seconds_per_layer
                / self.device.peak_int8_ops},
            "end_to_end_refused": self.end_to_end_refused or None,
        }


PIPELINING = ("tiles stream through the stages, each stage busy on a different tile; layer time = the longest head + "
              "busy + tail over the stages (closed form) + the serial host launch + a pre-norm site's own time; DDR "
              "is one bank shared by reads, writes and all pipelines")

ASSUMPTIONS = [
    "modeled, not measured on a board: device limits from hw/perf/device.json (sources there)",
    "AIE kernels: cycles of one invocation (one tile) from the engine kernels' instrumented vector path "
    "(hw/perf/engine_aie.py: closed-form counts = the counts of hw/aie/aie_api_emu.h, x the cost table of "
    "hw/perf/aie.py with its sources), perfect VLIW packing inside a loop, no memory-bank conflicts",
    "buffers: every kernel port is a ping-pong buffer filled or drained by the tile DMA (32 bits per AIE cycle per "
    "channel, AM009) while the kernel computes on the other half; each kernel's buffers in its own tile's 32 KB",
    "a 128-bit PLIO moves min(16 B x PL clock, 4 B x AIE clock) per second; a score channel streams a packet out, "
    "through the PL SwiftMax (Verilator-exact slots) and back without buffering in between",
    "DDR: one bank, 57 GB/s for all reads and writes together (an assumption, device.json ddr_gbps: no public VCK5000 "
    "measurement found)",
    "tiles dealt as the host deals them: whole (batch, head) groups round-robin over the pipelines",
    "layer time: the longest head + busy + tail over the stages (closed form); hw/design/simulate.py runs the "
    "same graph as a discrete-event simulation",
    "the requantizer kernel at the end of the P·V cascade turns O into int8 A (over o_out); the movers (q, k, v and "
    "output per pipeline) and their AXI4 master ports: "
    "per-instance costs in "
    "hw/perf/data/pl_infrastructure.json (assumptions with their reasoning; no Vitis HLS here)",
    "host: one serial launch per layer (device.json host_seconds_per_launch, an assumption), reported apart from "
    "the device time; the end-to-end time replaces it with the host's own calls per layer (compute-unit starts "
    "and waits, graph run, buffer syncs and their PCIe bytes), counted by running the host's launch code "
    "(host/launch_counts.py) and priced from public XRT measurements, plus the host's LayerNorm (encoders) and "
    "Q/K/V projections (operands on the host) measured here (hw/perf/data/host_ops.json)",
    "useful ops: 4·batch·heads·seq²·d_head per layer (padding and masked work cost time, not ops)",
]


# --------------------------------------------------------------------------------------------- the core


def _bound(parts: dict[str, float]) -> tuple[float, str]:
    key = max(parts, key=lambda k: parts[k])
    return parts[key], key


def check_engine(d: Design) -> None:
    """ValueError naming the first field of ``d`` that is not the engine's (the model costs the engine only): K/V
    resident in the kernels, int8 or int16 scores, 128-bit PLIOs."""
    if not d.kv_resident:
        raise ValueError("kv_resident must be true: the model costs the engine, whose kernels keep their K/V slices")
    if d.score_bits not in ENGINE_SCORE_BITS:
        raise ValueError(f"score_bits must be 8 or 16, not {d.score_bits}: the model costs the engine, whose QK^T "
                         "kernels write int8 or int16 scores")
    if d.plio_bits != ENGINE_PLIO_BITS:
        raise ValueError(f"plio_bits must be {ENGINE_PLIO_BITS}, not {d.plio_bits}: the model costs the engine, whose "
                         "PLIOs are 128-bit")


def _check(w: Workload, d: Design, dev: Device) -> None:
    check_engine(d)
    if d.pl_clock_mhz * 1e6 > dev.plio_max_pl_clock_fraction * dev.aie_clock_hz * (1 + 1e-9):
        raise ValueError(f"PL clock {d.pl_clock_mhz} MHz is above the PLIO limit "
                         f"({dev.plio_max_pl_clock_fraction:g} x AIE clock)")
    for n in w.normalizers:
        if d.lanes(n) < 1:
            raise ValueError(f"the design has no {n} lanes but the workload has {n} layers")
    if d.max_seq is not None and w.seq > d.max_seq:
        raise ValueError(f"seq {w.seq} is longer than the design's max_seq {d.max_seq}")


def engine_pl_cycles(w: Workload, d: Design) -> int:
    """Modeled PL cycles of one layer on an engine design: the busiest score channel's packets back to back (the
    busiest pipeline's tiles, ``k/m`` packets each), then the PL top's output delay -- what the ``rtl`` backend
    measures without backpressure (``hw/pl/engine.py``;
    :func:`vckattn.hw.pl.timing.engine_packet_slots` equals Verilator)."""
    g = engine.geometry(w, d, load_device(), "swiftmax")
    tiles = max(len(x) for x in engine.deal(g.groups, g.pipelines)) * g.tiles_per_group
    return tiles * g.per_channel * timing.engine_packet_slots(g.q_rows * g.sk, g.lanes) + timing.ENGINE_OUT_DELAY


def layer_stages(w: Workload, d: Design, dev: Device, normalizer: str) -> tuple[list[Stage], float, str]:
    """The stages of one layer with ``normalizer`` (:func:`.engine.layer_time`, the host's serial launch and a
    pre-norm site added) and the layer's modeled seconds and bottleneck."""
    times, seconds, bottleneck = engine.layer_time(w, d, dev, normalizer)
    stages = [Stage(t.name, t.busy, t.bound_by, t.head + t.tail, t.on_chip) for t in times]
    serial = d.host_launches_per_layer * dev.host_seconds_per_launch
    stages.append(Stage("host", serial, "host launch (assumed)", 0.0, on_chip=False))
    return stages, seconds + serial + _norm_site(w, d, dev, stages), bottleneck


def _norm_site(w: Workload, d: Design, dev: Device, stages: list[Stage]) -> float:
    """A pre-norm site runs on the token stream before the (host) projections: its own time, added in series
    (its stage is put first in ``stages``); 0 without one."""
    if w.norm_site is None:
        return 0.0
    f_pl = d.pl_clock_mhz * 1e6
    kern = NORM_SITE_KERNEL[w.norm_site]
    elems = w.batch * w.seq * w.hidden_size
    nparts = {"PL lanes (norm site)": elems / _epc(kern, d.norm_lanes) / f_pl}
    if w.operands != "on_chip":
        nparts["DDR (read x, write norm(x))"] = 2 * elems / dev.ddr_bytes_per_s
    nsec, nwhy = _bound(nparts)
    # first input to first output of one token (a token-buffering unit holds the whole token first):
    # the PL model's one-token stream time (both end beats counted) less the token's own output beats
    beats = -(-w.hidden_size // d.norm_lanes)
    nlat = (timing.stream_cycles(kern, 1, w.hidden_size, d.norm_lanes) - beats) / f_pl
    stages.insert(0, Stage("norm_site", nsec, nwhy, nlat))
    return nsec + nlat


def resources_used(w: Workload, d: Design, dev: Device) -> dict[str, float]:
    """Resources the design uses for the workload (AIE tiles and kernel memory, PLIOs, PL; :func:`.engine.resources`,
    plus a pre-norm site's unit)."""
    check_engine(d)
    # the normalizer units the build carries (a build with both carries both whatever the workload's layers)
    norms = tuple(n for n in NORMALIZERS if d.lanes(n) > 0) or ("swiftmax",)
    used = engine.resources(w, d, dev, norms, kernel_fit)
    if w.norm_site is not None:
        for k, v in zip(RESOURCE_KEYS, kernel_fit(NORM_SITE_KERNEL[w.norm_site], d.norm_lanes, 32), strict=True):
            used[k] += v
    return used


def resources_available(d: Design, dev: Device) -> dict[str, float]:
    plio = dev.plio_available(d.plio_bits)
    return {"aie_tiles": float(dev.aie_tiles), "aie_kernel_memory_bytes": float(dev.tile_memory_bytes),
            "plio_in": float(plio["in"]), "plio_out": float(plio["out"]), **{k: dev.pl[k] for k in RESOURCE_KEYS}}


def traffic(w: Workload, d: Design, dev: Device) -> dict[str, float]:
    """Bytes one layer moves: over DDR (reads + writes), over all PLIOs (both directions) and over PCIe."""
    check_engine(d)
    ge = engine.geometry(w, d, dev, w.normalizers[0])
    b = engine.ddr_bytes(ge, w.operands)
    tiles = ge.groups * ge.tiles_per_group
    plio = tiles * (ge.q_bytes + ge.k * (ge.s_bytes + ge.p_bytes) + ge.o_bytes) + ge.groups * 2 * ge.k * ge.kv_bytes
    pcie = float(w.batch * w.seq * w.d_head * (2 * w.heads + 2 * w.n_kv_heads)) if w.operands == "host" else 0.0
    return {"ddr_bytes": b["reads"] + b["writes"], "plio_bytes": float(plio), "pcie_bytes": pcie}


def layer_seconds(w: Workload, d: Design, dev: Device) -> float:
    """Modeled seconds per layer averaged over the workload's layers (the explorer's fast path)."""
    _check(w, d, dev)
    per = {n: layer_stages(w, d, dev, n)[1] for n in w.normalizers}
    return sum(per[n] for n in w.layers) / len(w.layers)


def evaluate(w: Workload, d: Design, dev: Device | None = None) -> Perf:
    """The modeled performance of workload ``w`` on design ``d`` (see the module docstring)."""
    dev = dev or load_device()
    _check(w, d, dev)
    per = {n: layer_stages(w, d, dev, n) for n in w.normalizers}
    n_layers = len(w.layers)
    counts = {n: w.layers.count(n) for n in per}
    # stage seconds averaged over the layers (exact when all layers share a normalizer)
    names = [s.name for s in per[w.layers[0]][0]]
    stages = []
    for i, name in enumerate(names):
        secs = sum(per[n][0][i].seconds * counts[n] for n in per) / n_layers
        first = per[w.layers[0]][0][i]
        stages.append(Stage(name, secs, first.bound_by, first.latency_s, first.on_chip))
    seconds = sum(per[n][1] * counts[n] for n in per) / n_layers
    bottleneck = per[w.layers[0]][2]
    # the on-chip ceiling: the same stages without DDR/PCIe/host (operands on chip)
    oc = replace(w, operands="on_chip", norm_site=None)
    oc_per = {n: layer_stages(oc, d, dev, n) for n in oc.normalizers}
    oc_busy = sum(max(s.seconds for s in oc_per[n][0] if s.on_chip) * counts[n] for n in oc_per) / n_layers
    ops = w.ops_per_layer
    tops = ops / seconds / 1e12
    serial = d.host_launches_per_layer * dev.host_seconds_per_launch
    # the host's side is counted from the host's own code by the host layer (vckattn.host.launch_counts)
    e2e, refused = None, "not counted here: the host layer adds it (vckattn.host.launch_counts.with_end_to_end)"
    e2e_device = seconds - serial
    if w.operands == "host":  # the host's syncs move the operands, serially: the card's part is the DDR flow's
        wd = replace(w, operands="ddr")
        e2e_device = sum(layer_stages(wd, d, dev, n)[1] * counts[n] for n in per) / n_layers - serial
    return Perf(
        device=dev, workload=w, design=d, stages=stages, seconds_per_layer=seconds,
        layer_seconds=[{"index": i, "normalizer": n, "seconds": per[n][1], "bottleneck": per[n][2]}
                       for i, n in enumerate(w.layers)],
        tops=tops, fraction_of_peak=ops / seconds / dev.peak_int8_ops, tops_on_chip=ops / oc_busy / 1e12,
        bottleneck=bottleneck, used=resources_used(w, d, dev), available=resources_available(d, dev),
        traffic=traffic(w, d, dev), assumptions=list(ASSUMPTIONS), host_serial_seconds=serial,
        kernels=engine.kernel_report(w, d, dev, w.normalizers[0]), end_to_end=e2e, end_to_end_refused=refused,
        end_to_end_device_seconds=e2e_device,
    )


__all__ = ["ASSUMPTIONS", "BERT_BASE", "DEVICE_FILE", "Design", "Device", "NORMALIZERS", "NORM_SITES", "OPERANDS",
           "PIPELINING", "Perf", "STAGES", "Stage", "Workload", "check_engine", "design_from_json",
           "design_from_manifest", "engine_pl_cycles", "evaluate", "kernel_fit", "layer_seconds", "layer_stages",
           "load_device", "normalizer_name", "resources_available", "resources_used", "traffic",
           "workload_from_bundle_info", "workload_from_flags", "workload_from_hf_config"]
