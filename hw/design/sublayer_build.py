"""Sublayer builds: the attention engine grown to the whole attention sublayer (X in, Y out).

The full description: ``docs/internals/hw.md``, section ``hw/design/sublayer_build.py``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from vckattn.golden.bhyt_int import BHYT_EXACT_ID, NormFormat, bhyt_exact_regmap
from vckattn.golden.rope_int import ROPE_ID, check_rope_geometry, rope_regmap
from vckattn.golden.sublayer import RESIDUAL_ID, residual_regmap
from vckattn.hw.design.manifest import gemm_memory_problem
from vckattn.hw.spec.gemm import GemmParams

#: families a sublayer build serves (golden/sublayer.py)
FAMILIES = ("encoder", "decoder")
@dataclass(frozen=True)
class SublayerBuild:
    """A sublayer build: ``family``, model width ``d_model``, the engine's design (``engine``: a design dict of
    :mod:`.generate`), the two cascades' GEMM builds, how many of each (``qkv_cascades``, ``o_cascades``), the
    cascades a w PLIO serves (``w_share``), the sequences a launch's dealing assumes (``batch``,
    :func:`vckattn.hw.perf.sublayer.deal_projection`), the fused Q/K/V projection's outputs (``qkv_cols``: None for
    ``3·d_model``; fewer with grouped-query attention) and the PL units' geometry (``unit_lanes`` elements a cycle
    each; ``max_d`` channels; RoPE ``rope_head_dim`` × ``max_seq`` positions)."""

    name: str
    family: str
    d_model: int
    engine: dict
    qkv: GemmParams
    o: GemmParams
    unit_lanes: int = 4
    max_d: int = 1024
    rope_head_dim: int = 64
    qkv_cascades: int = 1
    o_cascades: int = 1
    w_share: int = 1
    batch: int = 1
    qkv_cols: int | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"family {self.family!r}: one of {FAMILIES}")
        for name, g in (("qkv", self.qkv), ("o", self.o)):
            if g.k != self.d_model:
                raise ValueError(f"{name}: {g.kernels} kernels of {g.slices_text()} "
                                 f"features ({g.k}) is not d_model {self.d_model}")
            too_big = gemm_memory_problem(g)
            if too_big:
                raise ValueError(f"{name}: {too_big}")
        if (self.qkv.out_bits, self.o.out_bits) != (8, 32):
            raise ValueError("the Q/K/V cascade requantizes (out_bits 8), the W_O cascade gives Y (out_bits 32)")
        if not self.d_model <= self.max_d:
            raise ValueError(f"d_model {self.d_model} exceeds the units' max_d {self.max_d}")

    @property
    def max_seq(self) -> int:
        return int(self.engine["max_seq"])

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "qkv": self.qkv.to_json(), "o": self.o.to_json()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SublayerBuild:
        """The build :meth:`to_json` wrote (ValueError / TypeError / KeyError for anything else)."""
        return cls(**{**data, "qkv": GemmParams(**data["qkv"]), "o": GemmParams(**data["o"])})

    def place(self) -> tuple[Any, Any, Any]:
        """The build's AIE graph placed: (the attention pipelines' design, their :class:`.layout.Layout`, the
        projection cascades' :class:`.gemm_graph.GemmPlacement`); GenerateError when it does not fit the array."""
        from vckattn.hw.design import gemm_graph
        from vckattn.hw.design import layout as lay
        from vckattn.hw.design.render import GenerateError
        from vckattn.hw.perf.model import design_from_json

        design = design_from_json({**self.engine, "name": self.name})
        try:
            placed = lay.layout(design.pipelines, design.qk_kernels, design.score_plios)
            return design, placed, gemm_graph.placed_stages(self.gemm_stages(), placed)
        except lay.LayoutError as exc:
            raise GenerateError(f"{self.name}: {exc}") from None

    def gemm_stages(self) -> list[Any]:
        """The projection stages on the array (:func:`.gemm_graph.stages_of_split`)."""
        from vckattn.hw.design.gemm_graph import stages_of_split

        return stages_of_split(self.d_model, self.batch, self.qkv, self.o, self.qkv_cascades, self.o_cascades,
                               self.w_share, self.qkv_cols)


def _units(b: SublayerBuild) -> dict[str, dict]:
    """The PL units of ``b`` with their register maps (``registers``: :meth:`RegisterMap.describe` as manifests
    record kernels' registers)."""
    from vckattn.hw.design.manifest import describe_registers

    lanes, max_d = b.unit_lanes, b.max_d
    units = {"residual": {"kind": "rtl", "id": RESIDUAL_ID, "lanes": lanes, "max_d": max_d,
                          "doc": "R = X + Y: the W_O accumulators Y (int32) and the residual input X (int8) aligned "
                                 "to the output scale per channel and added (hw/pl/residual.py)",
                          "registers": describe_registers(residual_regmap(lanes, max_d))}}
    if b.family == "decoder":
        check_rope_geometry(lanes, b.rope_head_dim, b.max_seq)
        units["bhyt_site"] = {"kind": "rtl", "id": BHYT_EXACT_ID, "lanes": lanes, "max_d": max_d,
                              "doc": "BHyT site A on the block input H: its statistic S = Σ H² computed on chip, "
                                     "U = γ ⊙ tanh(λ H / (κ √(S/d + ε))) int8 at the attention input's scale "
                                     "(hw/pl/bhyt_exact.py)",
                              "registers": describe_registers(bhyt_exact_regmap(lanes, max_d, NormFormat()))}
        units["rope"] = {"kind": "rtl", "id": ROPE_ID, "lanes": lanes, "head_dim": b.rope_head_dim,
                         "max_pos": b.max_seq,
                         "doc": "RoPE on every Q and K head row at its position: int16 Q1.14 tables programmed "
                                "from the bundle (hw/pl/rope.py)",
                         "registers": describe_registers(rope_regmap(lanes, b.rope_head_dim, b.max_seq))}
    return units


#: what runs each stage of a sublayer build, as the manifest names it (``stages[].by``)
_STAGE_PARTS = {"site_a": ("pl", "sublayer.units.bhyt_site"), "qkv": ("aie", "sublayer.gemm.qkv"),
                "rope": ("pl", "sublayer.units.rope"), "attention": ("aie", "graph"),
                "o_proj": ("aie", "sublayer.gemm.o"), "residual": ("pl", "sublayer.units.residual")}


def device_stages(family: str) -> list[dict[str, str]]:
    """The ``stages`` of a sublayer build of ``family``: every stage of the family (golden/stages.py) on the
    device, each with the manifest part that runs it."""
    from vckattn.golden.stages import FAMILY_STAGES

    return [{"stage": s, "where": _STAGE_PARTS[s][0], "by": _STAGE_PARTS[s][1]} for s in FAMILY_STAGES[family]]


def sublayer_manifest(b: SublayerBuild, board: str = "vck5000") -> dict:
    """The manifest of ``b``: the engine's (:func:`.render.engine_manifest`) plus its ``sublayer`` section."""
    from vckattn.hw.design.render import HEAD_DIMS, engine_manifest
    from vckattn.hw.perf.model import design_from_json

    design = design_from_json({**b.engine, "name": b.name})
    m = engine_manifest(design, board, b.name, max_seq=b.max_seq, head_dims=HEAD_DIMS)
    m["stages"] = device_stages(b.family)
    device = None
    if top_generated(b):
        from vckattn.hw.design.sublayer_pl import device_sections

        device = device_sections(b, m, build_top_plan(b))
        m.update({k: device[k] for k in ("kernels", "connectivity", "graph")})
    m["sublayer"] = {
        "family": b.family,
        "d_model": b.d_model,
        "gemm": {"qkv": b.qkv.to_json(), "o": b.o.to_json()},
        "units": _units(b),
        "layernorm": "host" if b.family == "encoder" else "none",
        "doc": ("the attention sublayer, X in, Y out: the fused Q/K/V GEMM cascade (requantized per channel), "
                + ("BHyT site A before it and RoPE on Q and K after it, " if b.family == "decoder" else "")
                + "the attention engine, the W_O GEMM cascade and the residual add"
                + ("; the LayerNorm after the residual on the host" if b.family == "encoder" else "")
                + (". Every device part is declared in kernels and connectivity (the PL top: pl_top)" if device else
                   ". The GEMM stages' graph and link configuration are not generated: simulation backends only")),
    }
    if device:
        m["sublayer"]["pl_top"] = device["pl_top"]
    return m


def _small_engine(max_seq: int = 128) -> dict:
    from vckattn.hw.design.render import SMALL_DESIGN
    return {**SMALL_DESIGN, "max_seq": max_seq}


#: the committed small sublayer builds the simulation tests run: a MiniLM-width encoder (d 384: 4 kernels of 96
#: features) and a SmolLM2-width decoder (d 576: 6 kernels), each around the small attention engine
SUBLAYER_BUILDS: dict[str, SublayerBuild] = {
    "sublayer_small_encoder": SublayerBuild("sublayer_small_encoder", "encoder", 384, _small_engine(),
                                            GemmParams(4, 32, 64, 96, 8), GemmParams(4, 16, 64, 96, 32)),
    "sublayer_small_decoder": SublayerBuild("sublayer_small_decoder", "decoder", 576, _small_engine(),
                                            GemmParams(6, 32, 64, 96, 8), GemmParams(6, 16, 64, 96, 32),
                                            qkv_cols=960),
}


def split_build(name: str, shape: Any, split: dict[str, Any]) -> SublayerBuild:
    """The sublayer build of a split of the closed-form model (:func:`vckattn.hw.perf.sublayer.best_split`'s
    ``split`` for ``shape``): its attention pipelines as the engine's design, its Q/K/V and W_O GEMM tiles as
    cascade builds with balanced K-slices (:func:`vckattn.hw.perf.sublayer.gemm_params`), its cascade counts, w
    PLIO sharing and batch."""
    from vckattn.hw.perf import sublayer as sl

    sp = sl.SublayerSplit(**split)
    _, design = sl.attention_design(shape, sp)
    d = shape.d_model
    qkv, o = sl.gemm_params(sp.qkv_tile, d, 8), sl.gemm_params(sp.o_tile, d, 32)
    return SublayerBuild(name, shape.family, d, {**design.to_json(), "name": name}, qkv, o, qkv_cascades=sp.n_qkv,
                         o_cascades=sp.n_o, w_share=sp.w_share, batch=shape.batch,
                         qkv_cols=None if shape.qkv_cols == 3 * d else shape.qkv_cols)


def split_of(b: SublayerBuild) -> dict[str, Any]:
    """The closed-form model's split (:class:`vckattn.hw.perf.sublayer.SublayerSplit` fields) that build ``b`` is
    made from (:func:`split_build`'s inverse; all of X kept on chip, as the model's splits keep it)."""
    e = b.engine
    return {"n_qkv": b.qkv_cascades, "n_o": b.o_cascades, "n_att": int(e["pipelines"]), "kq": int(e["qk_kernels"]),
            "q_rows": int(e["q_rows"]), "qkv_tile": (b.qkv.rows, b.qkv.cols, b.d_model // b.qkv.kernels),
            "o_tile": (b.o.rows, b.o.cols, b.d_model // b.o.kernels),
            "normalizer": "swiftmax" if e["lanes_swiftmax"] else "online_softmax",
            "score_channels": int(e["score_plios"]), "swiftmax_products": e.get("swiftmax_products", "auto"),
            "w_share": b.w_share, "x_on_chip": True}


def graph_build(name: str, shape: Any, split: dict[str, Any]) -> SublayerBuild:
    """:func:`split_build` of the split's AIE graph: the score channels' normalizer runs in the PL, so the graph is
    the same whichever it is, and an online-softmax split's is its SwiftMax twin's (the generator writes no
    attention design without SwiftMax lanes)."""
    return split_build(name, shape, {**split, "normalizer": "swiftmax"})


#: the full-size sublayers for the VCK5000, each at the closed-form model's best split for batch 8 of S = 512
#: (``vckattn perf --scope sublayer``; a test keeps each equal to it): ``vck5000_sublayer``, the BERT-base encoder
#: (d_model 768, 12 heads x 64, S <= 512), and ``vck5000_sublayer_decoder``, SmolLM2-135M converted to BHyT (d_model
#: 576, 9 query and 3 K/V heads x 64, RoPE, causal). Each is generated whole (``vckattn hw generate NAME``: its
#: AIE graph, its PL top, movers and system.cfg) and checked (``vckattn hw check NAME``)
#: the attention pipelines of the full-size builds: the model's (:func:`vckattn.hw.perf.sublayer.attention_design`)
_FULL_SIZE_ENGINE = {"qk_kernels": 4, "pv_kernels": 4, "q_rows": 32, "key_block": 32, "score_bits": 8,
                     "plio_bits": 128, "score_plios": 2, "in_plios": 3, "out_plios": 1, "lanes_swiftmax": 16,
                     "lanes_online_softmax": 0, "swiftmax_products": "auto", "norm_lanes": 4, "pl_clock_mhz": 250.0,
                     "kv_resident": True, "o_bits": 8, "host_launches_per_layer": 1, "max_seq": 512, "head_dim": 64}

FULL_SIZE_BUILDS: dict[str, SublayerBuild] = {
    "vck5000_sublayer": SublayerBuild(
        "vck5000_sublayer", "encoder", 768, {**_FULL_SIZE_ENGINE, "pipelines": 12, "name": "vck5000_sublayer"},
        GemmParams(4, 16, 48, 208, 8, kslice_last=144), GemmParams(4, 8, 48, 208, 32, kslice_last=144),
        qkv_cascades=36, o_cascades=16, w_share=2, batch=8),
    "vck5000_sublayer_decoder": SublayerBuild(
        "vck5000_sublayer_decoder", "decoder", 576,
        {**_FULL_SIZE_ENGINE, "pipelines": 17, "name": "vck5000_sublayer_decoder"},
        GemmParams(6, 16, 64, 112, 8, kslice_last=16), GemmParams(3, 8, 48, 208, 32, kslice_last=160),
        qkv_cascades=15, o_cascades=24, w_share=2, batch=8, qkv_cols=960),
}

#: the model's shape of each full-size build (:class:`vckattn.hw.perf.sublayer.SublayerShape` fields)
FULL_SIZE_SHAPES: dict[str, dict[str, Any]] = {
    "vck5000_sublayer": {"batch": 8, "seq": 512, "heads": 12, "head_dim": 64},
    "vck5000_sublayer_decoder": {"batch": 8, "seq": 512, "heads": 9, "head_dim": 64, "kv_heads": 3,
                                 "family": "decoder"},
}


#: the shape each small build's PL top is made for (the heads its A writers and Q/K/V buffer are laid out for): the
#: models the simulation tests run on them, all-MiniLM-L6-v2 (12 heads x 32) and SmolLM2-135M with BHyT (9 query and 3
#: K/V heads x 64), one sequence of up to 128 tokens a launch
SMALL_SHAPES: dict[str, dict[str, Any]] = {
    "sublayer_small_encoder": {"batch": 1, "seq": 128, "heads": 12, "head_dim": 32},
    "sublayer_small_decoder": {"batch": 1, "seq": 128, "heads": 9, "head_dim": 64, "kv_heads": 3, "family": "decoder"},
}
#: every build's shape: the full-size builds' and the small builds'
BUILD_SHAPES: dict[str, dict[str, Any]] = {**FULL_SIZE_SHAPES, **SMALL_SHAPES}


def top_generated(b: SublayerBuild) -> bool:
    """Whether the generator writes ``b``'s PL top (:func:`build_top_plan`): every committed build's, the full-size
    ones and the small ones (:data:`BUILD_SHAPES`)."""
    return b.name in BUILD_SHAPES


def build_shape(b: SublayerBuild) -> Any:
    """The model's shape of build ``b`` (:data:`BUILD_SHAPES`, :class:`vckattn.hw.perf.sublayer.SublayerShape`);
    :class:`.pl_top.TopError` for a build that has none."""
    from vckattn.hw.design.pl_top import TopError
    from vckattn.hw.perf.sublayer import SublayerShape

    if b.name not in BUILD_SHAPES:
        raise TopError(f"{b.name}: the PL top is generated for the committed builds ({', '.join(BUILD_SHAPES)})")
    return SublayerShape(**BUILD_SHAPES[b.name])


def build_top_plan(b: SublayerBuild) -> Any:
    """The PL top of build ``b`` (:func:`.pl_top.top_plan` of its split, residual units of ``b.max_d``
    channels and ``b.unit_lanes`` lanes)."""
    from vckattn.hw.design.pl_top import top_plan
    from vckattn.hw.perf.sublayer import SublayerSplit

    return top_plan(build_shape(b), SublayerSplit(**split_of(b)), lanes=b.unit_lanes, max_d=b.max_d)


def unit_regmap(manifest: Any, unit: str) -> Any:
    """The register map of PL unit ``unit`` of a sublayer manifest, as the manifest records it."""
    from vckattn.golden.regmap import RegisterMap

    return RegisterMap.from_describe(manifest.data["sublayer"]["units"][unit]["registers"])


__all__ = ["BUILD_SHAPES", "FAMILIES", "FULL_SIZE_BUILDS", "FULL_SIZE_SHAPES", "SMALL_SHAPES", "SUBLAYER_BUILDS",
           "SublayerBuild", "build_shape", "build_top_plan", "device_stages", "graph_build", "split_build", "split_of",
           "sublayer_manifest", "top_generated", "unit_regmap"]
