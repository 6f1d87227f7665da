"""Why a SwiftMax layer's integer P format breaks, and what each format change would buy.

For each chosen layer of a checkpoint with SwiftMax β/γ (a model tuned with ``vckattn calibrate swiftmax``), on
calibration text, this runs the export's own steps (:mod:`vckattn.host.export`: activation capture, the layer's
int8 scales and P format at a percentile, the bit-exact integer layer) and reports:

* per head: β, γ, the largest, the percentile and the median P over the kept keys of real query rows, the share
  of the layer's float attention-output energy the head carries (``‖a_h·W_O,hᵀ‖²`` over the layer's), and the
  fraction of its P at or above the top of the export's 8-bit format (where the kernel saturates; for a layer
  tuned for its format, where its float SwiftMax saturates too);
* the integer layer's mean per-token cosine to its float layer (after W_O, real tokens) for the export's
  format and for format changes emulated with the golden integer operators (everything else bit-exact as the
  kernels compute it):

  ``export``             the bundle's layer (P format and int8 scales at the percentile, as ``vckattn export``);
  ``p_format_max``       P's 8-bit format holds the largest P (no P saturates);
  ``a_scale_max``        the head outputs' int8 scale s_a holds the largest one;
  ``per_head_p_scale``   a P format per head (each head's percentile; the SwiftMax registers can hold it, its
                         ``c_out`` per head), P·V requantized per head (the output mover has one requantization
                         per layer: a hardware change);
  ``p16``                16-bit P holding the largest P, P·V int16 × int8 (a change of the P·V kernel's format).

The float layer is the checkpoint's: saturating at its ``p_max`` when it was tuned for its P format
(``--p-frac``), in which case the export's format is that one.

    python -m research.experiments.swiftmax_pformat MODEL --calib FILE [--layers 0] [--percentile 99.9]
        [--max-length 64] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from vckattn.golden.aie_matmul import exact_int_matmul
from vckattn.golden.quant_attention import QuantAttentionLayer, finish_int, head_operands
from vckattn.golden.requant import requant_registers, requantize
from vckattn.golden.stages import attention_int
from vckattn.golden.swiftmax_int import SwiftMaxFormat, choose_out_frac, swiftmax_int, swiftmax_registers

VARIANTS = ("export", "p_format_max", "a_scale_max", "per_head_p_scale", "p16")


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1) + 1e-300)


def head_format_layer(layer: QuantAttentionLayer, x: np.ndarray, keep: np.ndarray, beta: np.ndarray,
                      gamma: np.ndarray, p_fracs: Sequence[int], out_bits: int = 8,
                      s_a: float | None = None) -> np.ndarray:
    """``layer``'s integer output ``(B, S, d)`` with head ``h``'s P in an ``out_bits``-bit format of scale
    ``2^-p_fracs[h]`` (golden :func:`swiftmax_int` with that head's registers) and its P·V requantized with its own
    ``s_v·2^-p_fracs[h]/s_a`` (``s_a``: default the layer's); projections, Q·Kᵀ and W_O as :func:`attention_int`."""
    s_a = layer.s_a if s_a is None else s_a
    ops = head_operands(layer, x, keep)
    s = exact_int_matmul(ops["q"], np.ascontiguousarray(ops["k"].transpose(0, 1, 3, 2)))
    kb = np.broadcast_to(ops["keep"][:, None], s.shape)
    fmt = replace(SwiftMaxFormat(), out_bits=out_bits)
    a = np.zeros(ops["q"].shape, np.int64)
    for h in range(layer.n_heads):
        regs = swiftmax_registers(layer.s_q, layer.s_k, layer.head_dim, float(beta[h]), float(gamma[h]),
                                  int(p_fracs[h]), fmt)
        o = exact_int_matmul(swiftmax_int(s[:, h], regs, kb[:, h], fmt), ops["v"][:, h // layer.n_rep])
        a[:, h] = requantize(o, requant_registers(layer.s_v * 2.0 ** -int(p_fracs[h]) / s_a))
    return finish_int(replace(layer, s_a=s_a), a.astype(np.int8))[0]


@torch.no_grad()
def analyse_layer(m: object, i: int, cap: object, percentile: float) -> dict:
    """The report of layer ``i`` (module docstring) of the loaded model ``m`` on the captured calibration ``cap``."""
    from vckattn.host.export.constants import swiftmax_beta_gamma
    from vckattn.host.export.quantize import activation_scales, build_layer
    from vckattn.host.export.reference import float_layer

    ly = m.layers[i]  # type: ignore[attr-defined]
    beta, gamma, source = swiftmax_beta_gamma(m, i, cap, "max", True)  # type: ignore[arg-type]
    p_sat = ly.swiftmax_p_max if source == "checkpoint" else None
    scales, p_fmt = activation_scales(m, i, cap, "swiftmax", "percentile", percentile, beta, gamma, p_sat)  # type: ignore[arg-type]
    layer = build_layer(ly, scales, "swiftmax", beta, gamma, p_fmt)
    n_heads, d = layer.n_heads, layer.head_dim
    w_o = ly.mha.o_proj.weight.detach().double().numpy().reshape(-1, n_heads, d)
    batches = list(zip(cap.x[i], cap.rope[i], cap.batches, strict=True))  # type: ignore[attr-defined]
    p_heads: list[list[np.ndarray]] = [[] for _ in range(n_heads)]
    energy = np.zeros(n_heads)
    floats, a_max = [], 0.0
    for x, rope, b in batches:
        f = float_layer(m, ly, x.astype(np.float64), b.keep, rope, "swiftmax", beta, gamma, p_sat)  # type: ignore[arg-type]
        real = np.asarray(b.keep, bool)
        kept = np.broadcast_to(f["keep4"].numpy(), f["p"].shape) & real[:, None, :, None]
        for h in range(n_heads):
            p_heads[h].append(f["p"][:, h][kept[:, h]])
        a_h = f["a"].reshape(*f["a"].shape[:2], n_heads, d)[real]
        energy += np.array([np.square(a_h[:, h] @ w_o[:, h].T).sum() for h in range(n_heads)])
        floats.append(ly.mha.o_proj(torch.from_numpy(f["a"])).numpy()[real])
        a_max = max(a_max, float(np.abs(f["a"]).max()))
    ph = [np.concatenate(v) for v in p_heads]
    p_all = np.concatenate(ph)
    top = layer.sm_fmt.out_max * 2.0**-layer.p_frac
    fmt16 = replace(SwiftMaxFormat(), out_bits=16)
    layers = {"export": layer,
              "p_format_max": build_layer(ly, scales, "swiftmax", beta, gamma, float(p_all.max())),
              "a_scale_max": build_layer(ly, dict(scales, s_a=a_max / 127), "swiftmax", beta, gamma, p_fmt)}
    head_fracs = [choose_out_frac(float(np.percentile(v, percentile)) if v.size else 1.0) for v in ph]
    outs: dict[str, list[np.ndarray]] = {k: [] for k in VARIANTS}
    for x, _rope, b in batches:
        x64, real = x.astype(np.float64), np.asarray(b.keep, bool)
        for k, ql in layers.items():
            outs[k].append(attention_int(ql, x64, b.keep)[0][real])
        outs["per_head_p_scale"].append(head_format_layer(layer, x64, b.keep, beta, gamma, head_fracs)[real])
        f16 = [choose_out_frac(float(p_all.max()), fmt16)] * n_heads
        outs["p16"].append(head_format_layer(layer, x64, b.keep, beta, gamma, f16, out_bits=16)[real])
    ref = np.concatenate(floats)
    return {
        "layer": i, "beta_source": source, "p_max": p_sat, "percentile": percentile, "p_frac": layer.p_frac,
        "p_format_top": top, "s_a": layer.s_a, "s_a_max": a_max / 127,
        "cosine": {k: float(_cos(np.concatenate(v), ref).mean()) for k, v in outs.items()},
        "per_head_p_frac": head_fracs,
        "heads": [{"head": h, "beta": float(beta[h]), "gamma": float(gamma[h]), "p_max": float(ph[h].max()),
                   "p_percentile": float(np.percentile(ph[h], percentile)), "p_median": float(np.median(ph[h])),
                   "output_energy_share": float(energy[h] / energy.sum()),
                   "at_top": float((ph[h] >= top).mean())} for h in range(n_heads)],
    }


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m research.experiments.swiftmax_pformat",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a Hugging Face folder with SwiftMax β/γ (vckattn calibrate swiftmax's OUT/model)")
    ap.add_argument("--calib", type=Path, required=True, metavar="FILE", help="calibration text, one sample a line")
    ap.add_argument("--layers", default="0", help="layers to analyse, e.g. 0,1 (default 0)")
    ap.add_argument("--percentile", type=float, default=99.9, help="the export's percentile (default 99.9)")
    ap.add_argument("--max-length", type=int, default=64, help="tokens per sample (default 64)")
    ap.add_argument("--samples", type=int, default=256, help="calibration samples (default 256)")
    ap.add_argument("--json", type=Path, dest="json_out", help="write the report as JSON")
    a = ap.parse_args(argv)
    from vckattn.host.export import sources
    from vckattn.host.export.capture import capture_activations

    m = sources.load_model(sources.resolve_checkpoint(a.model), False)
    text = [t.strip() for t in a.calib.read_text(encoding="utf-8").splitlines() if t.strip()][:a.samples]
    cap = capture_activations(m, text, a.max_length, 32, str(a.calib), False)
    report = {"model": a.model, "calib": str(a.calib), "samples": len(text), "max_length": a.max_length,
              "layers": [analyse_layer(m, int(i), cap, a.percentile) for i in a.layers.split(",")]}
    for r in report["layers"]:
        print(f"layer {r['layer']} (β/γ from the {r['beta_source']}, p_max {r['p_max']}): P format 2^-{r['p_frac']} "
              f"(top {r['p_format_top']:.4g}); integer vs float cosine "
              + ", ".join(f"{k} {v:.4f}" for k, v in r["cosine"].items()))
        for h in r["heads"]:
            print(f"  head {h['head']:2d}: β {h['beta']:7.3f} γ {h['gamma']:8.4f}  P max {h['p_max']:10.4g} "
                  f"p{r['percentile']:g} {h['p_percentile']:9.4g} median {h['p_median']:9.3g}  output share "
                  f"{h['output_energy_share']:.3g}  at the top {h['at_top']:.2%}")
    if a.json_out is not None:
        a.json_out.parent.mkdir(parents=True, exist_ok=True)
        a.json_out.write_text(json.dumps(report, indent=1))
        print(f"wrote {a.json_out}", file=sys.stderr)
    return report


if __name__ == "__main__":
    main()
