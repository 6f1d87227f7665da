"""Sublayer builds (hw/design/sublayer_build.py) and the host's StagedDevice (host/backends/staged.py): the
whole attention sublayer of real checkpoints, stage by stage, bit for bit against the golden integer sublayer
(golden/stages.py) computed independently from the same constants."""

from __future__ import annotations

import copy
import functools
import json

import numpy as np
import pytest

from vckattn.golden.bhyt_int import NormFormat, bhyt_exact_regmap, bhyt_register_values, gamma_values
from vckattn.golden.rope_int import rope_regmap, rope_table_banks, rope_tables_int
from vckattn.golden.stages import sublayer_int
from vckattn.golden.sublayer import residual_register_values, residual_regmap
from vckattn.host.backends.base import DeviceError
from vckattn.host.backends.staged import (
    RegisterFileModel,
    StagedDevice,
    StageError,
    bhyt_from_values,
    program_unit,
    residual_from_values,
    rope_from_values,
    sublayer_of,
)
from vckattn.hw.design.manifest import ManifestError, load_manifest, validate_manifest
from vckattn.hw.design.sublayer_build import SUBLAYER_BUILDS, sublayer_manifest
from vckattn.hw.spec.gemm import GemmParams

STAGES = {"encoder": ("q", "k", "v", "a", "y"), "decoder": ("stat", "u", "q_pre", "k_pre", "q", "k", "v", "a", "y")}


# ------------------------------------------------------------------------------------------------ real layers


@functools.cache
def minilm_swiftmax(index: int = 2, n: int = 2) -> tuple:
    """MiniLM layer ``index`` as a SwiftMax encoder sublayer (β/γ initialised from its calibration scores, as the
    exporter does) calibrated on 8 real sentences; its int8 input on ``n`` others (padded) and their keep mask."""
    from sublayer_data import minilm_source

    from vckattn.golden.sublayer import calibrate_encoder, quantize_input, swiftmax_constants
    from vckattn.host.textdata import real_sentences

    blk, hidden = minilm_source(index)
    hc, kc = hidden(real_sentences(8))
    he, ke = hidden(real_sentences(n, start_topic=60))
    beta, gamma = swiftmax_constants(blk.attn, hc, kc)
    sub = calibrate_encoder(blk.attn, blk.norm1, hc, kc, "swiftmax", beta, gamma)
    return sub, quantize_input(he, sub.attn.s_x), ke


@functools.cache
def smollm2_swiftmax(index: int = 0, n: int = 2) -> tuple:
    """SmolLM2-135M layer ``index`` converted to BHyT as a SwiftMax decoder sublayer calibrated on 6 real sentences;
    its int8 block input on ``n`` others, their keep mask and the int16 RoPE tables ``(S, 64)`` (slow)."""
    from sublayer_data import smollm2_source

    from vckattn.golden.sublayer import (
        calibrate_decoder,
        decoder_sublayer_float,
        quantize_input,
        rope_tables,
        swiftmax_constants,
    )
    from vckattn.host.textdata import real_sentences

    blk, capture = smollm2_source(index)
    (cc, kc), (ce, ke) = capture(real_sentences(6)), capture(real_sentences(n, start_topic=60))
    f = decoder_sublayer_float(blk.attn, blk.bhyt, cc["h"], kc, cc["rope"])
    beta, gamma = swiftmax_constants(blk.attn, f["u"], kc, rope=cc["rope"], causal=True)
    sub = calibrate_decoder(blk.attn, blk.bhyt, cc["h"], kc, cc["rope"], "swiftmax", beta, gamma)
    h = quantize_input(ce["h"], sub.s_h)
    c, s = rope_tables(ce["rope"], *h.shape[:2], 64)
    c, s = np.asarray(c).reshape(-1, *c.shape[-2:]), np.asarray(s).reshape(-1, *s.shape[-2:])
    assert all(np.array_equal(c[0], t) for t in c)  # one table for the batch (positions 0..S-1)
    return sub, h, ke, c[0], s[0]


def _check_run(backend: str, family: str, n: int = 2, **options: object) -> None:
    """Run the family's real layer on ``n`` sentences on ``backend`` and compare every stage with golden, bit for
    bit."""
    m = load_manifest(f"sublayer_small_{family}")
    dev = StagedDevice(m, backend, **options)
    if family == "encoder":
        sub, x, keep = minilm_swiftmax(n=n)
        rope = None
    else:
        sub, x, keep, c, s = smollm2_swiftmax(n=n)
        rope = (c, s)
    sub = sublayer_of(sub, dev.attention_layer(sub.attn))
    if family == "encoder":
        ref, tr = sublayer_int(sub, x, keep)
    else:
        ref, tr = sublayer_int(sub, x, keep, (c[None, None], s[None, None]))
    with dev:
        run = dev.run(sub, x, keep, rope)
    for name in STAGES[family]:
        assert np.array_equal(run.trace[name], tr[name]), f"{backend} {family}: stage {name} differs from golden"
    assert run.out.dtype == np.int8 and np.array_equal(run.out, ref)
    want_units = {"residual"} | ({"bhyt_site", "rope"} if family == "decoder" else set())
    assert set(run.registers) == want_units
    if family == "decoder":  # the BHyT constants as read back are the bundle's
        got = bhyt_from_values(run.registers["bhyt_site"], x.shape[2], sub.site_a.s_out, sub.fmt.norm)
        assert (got.k_mult, got.k_shift, got.eps_int, got.c_int, got.g_frac) == \
            (sub.site_a.k_mult, sub.site_a.k_shift, sub.site_a.eps_int, sub.site_a.c_int, sub.site_a.g_frac)
        assert np.array_equal(got.gamma, sub.site_a.gamma)


# ------------------------------------------------------------------------------------------------ builds


def test_committed_builds_validate_and_describe_their_stages() -> None:
    for name, build in SUBLAYER_BUILDS.items():
        m = load_manifest(name)
        s = m.data["sublayer"]
        assert s["family"] == build.family and s["d_model"] == build.d_model
        assert GemmParams(**s["gemm"]["qkv"]).k == build.d_model
        units = {"residual"} | ({"bhyt_site", "rope"} if build.family == "decoder" else set())
        assert set(s["units"]) == units
        assert s["units"]["residual"]["registers"] == json.loads(json.dumps(
            sublayer_manifest(build)["sublayer"]["units"]["residual"]["registers"]))
        assert m.data == json.loads(json.dumps(sublayer_manifest(build)))  # committed = generated


def test_a_gemm_build_whose_data_memory_does_not_fit_is_refused() -> None:
    """The build's memory check takes the largest kernel's data memory (hw/spec/gemm.py: kernel_memory, the one
    formula, which a C-simulation test holds equal to the kernel code's own figure) against the tile."""
    enc = SUBLAYER_BUILDS["sublayer_small_encoder"]
    big = GemmParams(4, 32, 64, 96, 32)
    with pytest.raises(ValueError, match="data memory") as info:  # 32 rows of int32 Y do not fit beside the buffers
        type(enc)("too_big", "encoder", 384, enc.engine, enc.qkv, big)
    # the last kernel's: its x, w and int32 out buffers, each ping-pong, and the state
    assert f"({2 * (16 + 32 * 96 + 16 + 96 * 64 + 16 + 32 * 64 * 4) + 64} B)" in str(info.value)


@pytest.mark.parametrize(("edit", "field"), [
    (lambda s: s["gemm"]["qkv"].update(kslice=80), "sublayer.gemm.qkv"),
    (lambda s: s["units"].pop("rope"), "sublayer.units"),
    (lambda s: s["units"]["residual"].update(id=0x12345678), "sublayer.units.residual.id"),
    (lambda s: s["units"]["rope"].update(max_pos=64), "sublayer.units.rope.max_pos"),
    (lambda s: s.update(family="vision"), "sublayer.family"),
])
def test_inconsistent_sublayer_section_refused(edit, field) -> None:  # noqa: ANN001 - lambdas
    data = copy.deepcopy(load_manifest("sublayer_small_decoder").data)
    edit(data["sublayer"])
    with pytest.raises(ManifestError) as exc:
        validate_manifest(data, "x.json")
    assert field in str(exc.value)


# ------------------------------------------------------------------------------------------------ registers


def test_register_model_holds_each_register_in_its_width() -> None:
    rm = residual_regmap(4, 64)
    port = RegisterFileModel(rm)
    port.write32(rm.offset("x_shift"), 0xFFFF_FF41)  # 6-bit register: only 0x01 is held
    assert port.read32(rm.offset("x_shift")) == 0x01
    port.write32(rm.offset("x_mult"), (1 << 17) | 5)  # signed 18-bit: bit 17 is the sign
    assert port.read32(rm.offset("x_mult")) == ((-(1 << 17) + 5) & 0xFFFFFFFF)
    with pytest.raises(DeviceError, match="no writable register"):
        port.write32(rm.offset("tokens"), 1)


def test_units_program_and_decode_exactly() -> None:
    """Every unit's constants survive program -> read back -> decode; a register file that loses a bit is caught."""
    rng = np.random.default_rng(3)
    from vckattn.golden.bhyt_int import BHyTSiteRegisters
    from vckattn.golden.requant import RequantRegisters
    from vckattn.golden.sublayer import ResidualRegisters

    d = 96
    res = ResidualRegisters(RequantRegisters(rng.integers(-(1 << 17), 1 << 17, d), rng.integers(0, 63, d)),
                            RequantRegisters(np.int64(77_000), np.int64(20)), 0.05)
    rm = residual_regmap(4, 128)
    back = program_unit(RegisterFileModel(rm), rm, residual_register_values(res, d, 128), "residual")
    got = residual_from_values(back, d, 0.05)
    assert np.array_equal(got.rq_y.mult, res.rq_y.mult) and np.array_equal(got.rq_y.shift, res.rq_y.shift)
    assert (int(got.rq_x.mult), int(got.rq_x.shift)) == (77_000, 20)

    fmt = NormFormat()
    site = BHyTSiteRegisters(12345, 30, (1 << 38) + 17, 0, rng.integers(-(1 << 15), 1 << 15, d), 12, 0.1)
    bm = bhyt_exact_regmap(4, 128, fmt)
    back = program_unit(RegisterFileModel(bm), bm, {**bhyt_register_values(site, fmt), "gamma": gamma_values(site)},
                        "bhyt_site")
    got = bhyt_from_values(back, d, 0.1, fmt)
    assert (got.k_mult, got.k_shift, got.eps_int, got.c_int, got.g_frac) == (12345, 30, (1 << 38) + 17, 0, 12)
    assert np.array_equal(got.gamma, site.gamma)

    ang = np.arange(20)[:, None] * 10000.0 ** (-np.arange(32) / 32)
    c, s = rope_tables_int(np.cos(np.concatenate([ang, ang], 1)), np.sin(np.concatenate([ang, ang], 1)))
    qm = rope_regmap(4, 64, 32)
    back = program_unit(RegisterFileModel(qm), qm, {"pos_base": 0, **rope_table_banks(c, s, 4, 64, 32)}, "rope")
    gc, gs = rope_from_values(back, 4, 64, 20)
    assert np.array_equal(gc, c) and np.array_equal(gs, s)

    class Lossy(RegisterFileModel):  # a register file whose gamma memory drops bit 3
        def read32(self, offset: int) -> int:
            w = super().read32(offset)
            return w & ~0x8 if offset >= bm.offset("gamma") else w

    with pytest.raises(DeviceError, match="readback mismatch"):
        program_unit(Lossy(bm), bm, {**bhyt_register_values(site, fmt), "gamma": gamma_values(site)}, "bhyt_site")


# ------------------------------------------------------------------------------------------------ refusals


def test_refusals_before_any_work() -> None:
    from vckattn.golden.errors import UserError

    m = load_manifest("sublayer_small_decoder")
    with pytest.raises(UserError, match="no xclbin flow"):
        StagedDevice(m, "xrt")
    sub, x, keep = minilm_swiftmax()
    eng = StagedDevice(load_manifest("engine_small"), "emu")  # an engine build: only the attention on the device
    with pytest.raises(StageError, match="up to 128 tokens"):
        eng.check(sub, 129)
    dev = StagedDevice(m, "emu")
    with pytest.raises(StageError, match="decoder sublayer build; this layer is a encoder"):
        dev.check(sub, x.shape[1])
    enc = StagedDevice(load_manifest("sublayer_small_encoder"), "emu")
    with pytest.raises(StageError, match="up to 128 tokens"):
        enc.check(sub, 129)
    with pytest.raises(ValueError, match="int8"):
        enc.run(sub, x.astype(np.int16), keep)


# ------------------------------------------------------------------------------------------------ real layers


@pytest.mark.parametrize("backend", ["emu", "csim"])
def test_minilm_encoder_sublayer_bit_exact(backend: str) -> None:
    if backend == "csim":
        from conftest import require_tools

        require_tools("g++", "hls4ml")
    _check_run(backend, "encoder")


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
@pytest.mark.parametrize("family", ["encoder", pytest.param("decoder", marks=pytest.mark.full)])
def test_sublayer_bit_exact_on_rtl(family: str) -> None:
    """The PL units (and the engine's PL top) in Verilator, registers over AXI4-Lite, on one real sentence (the
    units' random pauses are covered by their own tests and tests/sim/test_sublayer_rtl.py; the decoder on emu and csim
    through `vckattn run`: tests/host/export/test_export_sublayer.py)."""
    _check_run("rtl", family, n=1, pauses=False)


@pytest.mark.parametrize("family", ["encoder", "decoder"])
def test_an_attention_engine_build_runs_the_sublayer_with_the_other_stages_on_the_host(family: str) -> None:
    """The attention-only design is the sublayer design with every stage but the attention on the host: the same
    stage list through an engine build (engine_small) gives the golden sublayer bit for bit, the attention from the
    engine's model, the projections, RoPE, site A and the residual add from golden on the host; no PL unit is
    programmed (the build has none)."""
    m = load_manifest("engine_small")
    assert [s["stage"] for s in m.data["stages"]] == ["attention"]
    dev = StagedDevice(m, "emu")
    if family == "encoder":
        sub, x, keep = minilm_swiftmax(n=2)
        rope = None
    else:
        sub, x, keep, c, s = smollm2_swiftmax(n=2)
        rope = (c, s)
    sub = sublayer_of(sub, dev.attention_layer(sub.attn))
    ref, tr = sublayer_int(sub, x, keep, None if rope is None else (c[None, None], s[None, None]))
    with dev:
        run = dev.run(sub, x, keep, rope)
    assert np.array_equal(run.out, ref)
    for name in STAGES[family]:
        assert np.array_equal(run.trace[name], tr[name]), f"stage {name} differs from golden"
    assert run.registers == {} and set(run.seconds) == {"program", "attention"}
    want_host = {"qkv", "o_proj", "residual"} | ({"site_a", "rope"} if family == "decoder" else set())
    assert set(run.host_seconds) == want_host
    assert "every stage but the attention on the host by its golden model" in dev.where
