"""``vckattn run`` and ``vckattn eval`` on a sublayer build: whole MiniLM sublayers of an exported bundle through the
CLI's path (host/run.py, host/eval.py), bit-exact against golden's integer sublayer and close to the
checkpoint's float sublayer; refusals before any work. (The BHyT decoder: tests/host/export/test_export_sublayer.py
exports
SmolLM2 and runs its sublayer; tests/host/backends/test_staged_device.py runs both families on every backend.)"""

from __future__ import annotations

import json

import numpy as np
import pytest

from vckattn.golden.errors import UserError
from vckattn.host.run import run

TEXT = "The committee approved the new budget after a long debate about schools, roads and the city's parks."


def _check(report: dict, layers: list[int], backend: str) -> None:
    assert report["scope"] == "sublayer" and report["family"] == "encoder" and report["backend"] == backend
    assert [r["layer"] for r in report["layers"]] == layers
    for r in report["layers"]:
        assert r["bit_exact"] and r["first_difference"] is None, r
        # the output after the host LayerNorm against the checkpoint's float sublayer (untuned SwiftMax, int8)
        assert r["cosine"] > 0.995, r
        assert r["registers"]["residual"]["read_back"] == "exact"
        assert r["registers"]["residual"]["words"] == 2 + 2 * 384  # x_mult, x_shift, y_mult[384], y_shift[384]


@pytest.mark.parametrize("backend", ["emu", "csim"])
def test_run_minilm_sublayers(minilm_bundle, tmp_path, backend: str) -> None:
    if backend == "csim":
        from conftest import require_tools

        require_tools("g++", "hls4ml")
    arrays: dict = {}
    save = tmp_path / "io.npz"
    report = run(minilm_bundle, backend, text=TEXT, manifest_path="sublayer_small_encoder", progress=False,
                 arrays=arrays, save=save)
    _check(report, [0, 1], backend)
    json.dumps(report)  # the JSON report
    # --save writes the sublayer inputs; running from them gives the same outputs
    again = run(minilm_bundle, "emu", input_npz=save, manifest_path="sublayer_small_encoder", progress=False)
    assert [r["bit_exact"] for r in again["layers"]] == [True, True]
    with np.load(save) as f:
        keep = arrays[0]["keep"]
        assert np.allclose(f["layer0_output"], arrays[0]["out"][keep].astype(np.float32))


@pytest.mark.slow
@pytest.mark.sim
@pytest.mark.tool("verilator")
def test_run_minilm_sublayer_on_rtl(minilm_bundle) -> None:
    report = run(minilm_bundle, "rtl", text=TEXT, layers=[1], manifest_path="sublayer_small_encoder", progress=False,
                 device_options={"pauses": False})
    _check(report, [1], "rtl")
    assert report["layers"][0]["cycles"]["residual"] > 0


def test_padded_rows_do_not_set_the_output_scale(minilm_bundle) -> None:
    """Every layer's int8 head outputs A carry the real tokens' attention (a padded query row's output, which SwiftMax
    can make far larger, must not set s_a: it would leave every real A at 0)."""
    from vckattn.golden.stages import attention_int
    from vckattn.host.bundle import load_bundle
    from vckattn.host.export import to_quant_layer

    b = load_bundle(minilm_bundle)
    rng = np.random.default_rng(0)
    for i in (0, 1):
        layer = to_quant_layer(b, i)
        x = rng.standard_normal((1, 12, 384)) * layer.s_x * 40
        _, tr = attention_int(layer, x, np.ones((1, 12), bool))
        assert np.abs(tr["a"]).max() >= 8, f"layer {i}: A nearly all zero (s_a·127 = {layer.s_a * 127:.3g})"


def test_sublayer_run_refusals(minilm_bundle, tmp_path) -> None:
    with pytest.raises(UserError, match="sublayer build: it runs on emu, csim and rtl"):
        run(minilm_bundle, "xrt", text=TEXT, manifest_path="sublayer_small_encoder", progress=False)
    with pytest.raises(UserError, match="decoder sublayer build"):
        run(minilm_bundle, "emu", text=TEXT, manifest_path="sublayer_small_decoder", progress=False)


def test_eval_minilm_sublayers(minilm_bundle) -> None:
    """The whole model with its sublayers on the device, scored end to end against the float softmax model."""
    from vckattn.host.eval import evaluate

    r = evaluate(minilm_bundle, "emu", manifest_path="sublayer_small_encoder", n_sentences=4, max_tokens=24,
                 progress=False)
    assert r["scope"] == "sublayer" and r["layers"] == [0, 1]
    for row in r["per_layer"]:
        assert row["backend_vs_float_layer"]["cosine"] > 0.995, row
    e2e = r["end_to_end"]
    assert e2e["float_softmax"]["mean_cosine"] == pytest.approx(1.0)
    # the device's model follows the float SwiftMax model (the bundle's β/γ in float) closely
    assert abs(e2e["backend"]["mean_cosine"] - e2e["float_swiftmax"]["mean_cosine"]) < 0.02, e2e
