"""Accuracy reports of the integer model: ``vckattn report errors`` and ``vckattn report quant``.

* ``errors``: every integer operator against its float64 reference (exhaustive where the
  input space has at most 2^20 values, else ≥ 10^6 random values plus edge cases), with the
  documented error budget (:mod:`vckattn.golden.error_budget`).
* ``quant``: each attention layer of a real checkpoint (default: the shipped MiniLM),
  quantized end to end (int8 projections, integer QKᵀ, SwiftMax or online-softmax kernel,
  P·V, W_O) on real text, against the float golden model of the same layer: relative
  error and cosine similarity per layer.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from vckattn.golden.calibrate import RowSummary, init_beta_gamma
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat


def run_errors(json_out: Path | None = None) -> list[dict]:
    """Measure every operator; print a table; optionally write JSON."""
    from rich.table import Table
    from tqdm import tqdm

    from vckattn.golden import error_budget
    from vckattn.host.cli.common import make_console

    console = make_console()
    rows = []
    table = Table(title="integer operators vs float64 (errors in the unit shown)")
    for col in ("operator", "inputs", "unit", "max error", "mean error", "budget", "within"):
        table.add_column(col, justify="left" if col in ("operator", "unit") else "right")
    with tqdm(total=1, desc="measuring integer operators", file=sys.stderr, disable=None, leave=False) as bar:
        reports = error_budget.all_reports()
        bar.update(1)
    for r in reports:
        rows.append(r.as_dict())
        table.add_row(r.operator, f"{r.inputs:,}{' (all)' if r.exhaustive else ''}", r.unit, f"{r.max_error:.3g}",
                      f"{r.mean_error:.3g}", f"{r.budget_max:.3g}",
                      "[green]yes[/]" if r.violations == 0 else f"[red]{r.violations} over[/]")
    console.print(table)
    _write(json_out, {"report": "errors", "operators": rows}, console)
    return rows


def safe_swiftmax_constants(rows: RowSummary) -> tuple[float, float]:
    """β = the largest row max seen in calibration, γ = mean Σexp: P stays ≤ 1/γ·e^0 on calibration data
    (:func:`vckattn.golden.calibrate.init_beta_gamma`, ``max``, on a layer's calibration rows).

    (Used for the quantization report until β/γ come from replace-and-tune: the untuned mean-z_max
    initialisation makes P span many orders of magnitude, see ``make demo``.)
    """
    return init_beta_gamma(rows, "max")


#: ``run_quant(seq_len=…)``: calibration and held-out inputs of ``seq_len`` tokens each
LONG_INPUTS = 2


def run_quant(checkpoint: Path | None = None, sentences: list[str] | None = None, json_out: Path | None = None,
              n_calib: int = 32, n_eval: int = 16, seq_len: int | None = None,
              online_p_rounding: str | None = None) -> dict:
    """Per-layer integer-vs-float figures of a BERT-family checkpoint on real text.

    ``seq_len``: instead of one sentence per input, :data:`LONG_INPUTS` calibration and :data:`LONG_INPUTS`
    held-out inputs of exactly ``seq_len`` tokens, each made of consecutive sentences (of ``sentences``, or of
    CPython's documentation from topic 0 / 60): long rows, where P is small. ``online_p_rounding``: the
    online-softmax kernel's P rounding (:data:`~vckattn.golden.online_softmax_int.P_ROUNDINGS`; default: the
    build's, :class:`~vckattn.golden.online_softmax_int.OnlineSoftmaxFormat`), for comparisons."""
    from rich.table import Table
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from vckattn.golden import convert
    from vckattn.golden.blocks import BertLayer
    from vckattn.golden.pretrained import minilm_dir
    from vckattn.golden.quant_attention import calibrate_attention, compare, float_attention, narrow_layer
    from vckattn.golden.stages import attention_int
    from vckattn.host.cli.common import make_console
    from vckattn.host.textdata import real_sentences

    console = make_console()
    t0 = time.perf_counter()
    path = checkpoint or minilm_dir()
    if seq_len is not None:  # before the (slow) model load
        limit = int(getattr(AutoConfig.from_pretrained(path), "max_position_embeddings", 0) or 0)
        if not 1 < seq_len <= limit:
            raise ValueError(f"--seq-len {seq_len}: the model has {limit} positions (give 2..{limit})")
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path, dtype=torch.float64).eval()
    if convert.model_family(model) != "bert":
        raise ValueError(f"`report quant` handles BERT-family encoders; {path} is {model.config.model_type!r}")
    if seq_len is not None:
        calib, held = _long_inputs(tok, sentences, seq_len)
        cb = tok(calib, padding="max_length", truncation=True, max_length=seq_len, return_tensors="pt")
        hb = tok(held, padding="max_length", truncation=True, max_length=seq_len, return_tensors="pt")
    else:
        if sentences is None:
            calib, held = real_sentences(n_calib), real_sentences(n_eval, start_topic=60)
        else:
            calib, held = sentences[:n_calib], sentences[n_calib:n_calib + n_eval] or sentences[:n_eval]
        cb = tok(calib, padding=True, return_tensors="pt")
        hb = tok(held, padding=True, return_tensors="pt")
    with torch.no_grad():
        ch = model(**cb, output_hidden_states=True).hidden_states
        hh = model(**hb, output_hidden_states=True).hidden_states
    stats = _layer_stats(model, cb)
    cfg = model.config
    ck, hk = cb["attention_mask"].numpy().astype(bool), hb["attention_mask"].numpy().astype(bool)
    layers = []
    for i, hf_layer in enumerate(convert.decoder_layers(model)):
        blk = BertLayer(cfg.hidden_size, cfg.num_attention_heads, cfg.intermediate_size).double().load_hf(hf_layer)
        entry: dict = {"layer": i}
        for norm in ("softmax", "swiftmax"):
            beta, gamma = safe_swiftmax_constants(stats[i]) if norm == "swiftmax" else (0.0, 1.0)
            q_layer = calibrate_attention(blk.attn, ch[i].numpy(), ck, norm, beta, gamma)
            if norm == "softmax" and online_p_rounding is not None:
                q_layer = replace(q_layer, os_fmt=replace(q_layer.os_fmt, p_rounding=online_p_rounding))
            out, _ = attention_int(q_layer, hh[i].numpy(), hk)
            ref = float_attention(blk.attn, hh[i].numpy(), hk, norm, beta, gamma)["y"]
            entry[norm] = compare(out, ref, hk) | {"p_frac": q_layer.p_frac}
            for bits in (8, 16):  # the engine's narrow scores (AIE shift-round-saturate), shift from calibration
                narrow = narrow_layer(q_layer, bits)
                out_n, _ = attention_int(narrow, hh[i].numpy(), hk)
                entry[norm][f"int{bits}_scores"] = compare(out_n, ref, hk) | {"score_shift": narrow.score_shift}
            if norm == "swiftmax":
                entry[norm] |= {"beta": beta, "gamma": gamma}
        layers.append(entry)
    name = Path(path).parent.name if Path(path).name == "model" else Path(path).name
    os_fmt = OnlineSoftmaxFormat() if online_p_rounding is None else OnlineSoftmaxFormat(p_rounding=online_p_rounding)
    what = (f"{len(held)} held-out sentences" if seq_len is None else
            f"{len(held)} held-out inputs of {seq_len} tokens")
    table = Table(title=f"quantized attention layers vs float golden ({name}, {what}; online-softmax P rounding "
                        f"{os_fmt.p_rounding})")
    for col in ("layer", "softmax rel.err", "softmax cosine", "softmax cos. int8 scores", "SwiftMax rel.err",
                "SwiftMax cosine", "SwiftMax cos. int8 scores", "P scale", "int8 score shift"):
        table.add_column(col, justify="right")
    for e in layers:
        s, w = e["softmax"], e["swiftmax"]
        table.add_row(str(e["layer"]), f"{s['rel_error']:.4f}", f"{s['cosine']:.5f}",
                      f"{s['int8_scores']['cosine']:.5f}", f"{w['rel_error']:.4f}", f"{w['cosine']:.5f}",
                      f"{w['int8_scores']['cosine']:.5f}", f"2^-{w['p_frac']}", str(w["int8_scores"]["score_shift"]))
    console.print(table)
    report = {"report": "quant", "checkpoint": str(path), "sentences": {"calibration": len(calib), "eval": len(held)},
              "seq_len": seq_len, "online_softmax_p_rounding": os_fmt.p_rounding,
              "int8": "symmetric max-abs per tensor (activations), per output channel (weights)",
              "swiftmax_constants": "beta = max row z_max on calibration, gamma = mean sum exp(z - z_max)",
              "narrow_scores": "int8/int16 scores = the engine's AIE shift-round-saturate of the int32 Q·Kᵀ, the "
                               "shift the smallest that keeps the calibration maximum unsaturated (narrow_layer)",
              "layers": layers, "seconds": time.perf_counter() - t0}
    _write(json_out, report, console)
    return report


def _long_inputs(tok: object, sentences: list[str] | None, seq_len: int) -> tuple[list[str], list[str]]:
    """:data:`LONG_INPUTS` calibration and held-out texts of at least ``seq_len`` tokens: consecutive ``sentences``
    (the first :data:`LONG_INPUTS` texts calibrate, the next ones are held out), or CPython's documentation from
    topic 0 and from topic 60. ValueError when the text is too short."""
    from vckattn.host.textdata import long_texts

    if sentences is None:
        calib, held = long_texts(tok, LONG_INPUTS, seq_len), long_texts(tok, LONG_INPUTS, seq_len, start_topic=60)
    else:
        texts = long_texts(tok, 2 * LONG_INPUTS, seq_len, sentences=sentences)
        calib, held = texts[:LONG_INPUTS], texts[LONG_INPUTS:]
    if len(calib) < LONG_INPUTS or len(held) < LONG_INPUTS:
        raise ValueError(f"--seq-len {seq_len}: the text makes {len(calib) + len(held)} inputs of {seq_len} tokens; "
                         f"{2 * LONG_INPUTS} are needed ({LONG_INPUTS} to calibrate, {LONG_INPUTS} held out)")
    return calib, held


def _layer_stats(model: torch.nn.Module, batch: dict) -> list[RowSummary]:
    """Per layer, the summary of the softmax rows of ``batch`` (:func:`vckattn.golden.calibrate.collect_stats`)."""
    from vckattn.golden.calibrate import collect_stats

    return [RowSummary.of(s.z_max, s.sum_exp) for s in collect_stats(model, [batch])]


def _write(json_out: Path | None, report: object, console: object) -> None:
    if json_out is None:
        return
    from vckattn.host.output import write_json

    write_json(json_out, report)
    console.print(f"wrote {json_out}")  # type: ignore[attr-defined]

