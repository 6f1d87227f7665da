"""``vckattn convert bhyt MODEL --out DIR``: replace a Llama model's RMSNorms by BHyT (docs/methods.md §3).

The full description: ``docs/internals/host.md``, section ``host/convert_cmd.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from vckattn.golden.errors import UserError
from vckattn.host.output import write_json

# golden.bhyt defaults, repeated so that building the CLI parser imports no torch (a test keeps them equal)
DEFAULT_KAPPA, DEFAULT_LAM_ATTN, DEFAULT_LAM_MLP = 10.0, 2.0, 1.0
REPORT_NAME = "bhyt_convert.json"
GOLDEN_OUT = "model.pt"
DEFAULT_T = 1024


def _prepare_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise UserError(f"--out {out} exists and is not empty (pass --overwrite to replace it)")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)


def _check_llama_config(folder: Path, model: str) -> None:
    from vckattn.host.export import read_config_json

    mt = read_config_json(folder).get("model_type")
    if mt != "llama":
        raise UserError(f"{model}: model_type {mt!r} is not a Llama decoder; BHyT conversion needs model_type 'llama'")


def _layer_rows(values: list[tuple[float, float, float]], kappa: float) -> list[dict]:
    """``[(c_attn, λ_A, λ_M)]`` -> per-layer report rows (ŝ² increment c_attn λ_A²/κ²)."""
    return [{"layer": i, "c_attn": c, "lam_attn": la, "lam_mlp": lm, "var_increment": c * la * la / (kappa * kappa)}
            for i, (c, la, lm) in enumerate(values)]


def _convert_hf(src, out: Path, seq_len: int, lam_attn: float, lam_mlp: float, kappa: float) -> tuple[Path, list]:
    import torch
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    from vckattn.golden import convert
    from vckattn.host.checkpoints import gguf_folder
    from vckattn.host.export import first_line, quiet_transformers

    quiet_transformers()
    folder = gguf_folder(src) if src.kind == "gguf" else src.path.parent if src.kind == "safetensors" else src.path
    try:
        archs = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("architectures") or []
        cls = AutoModelForCausalLM if any(a.endswith("ForCausalLM") for a in archs) else AutoModel
        model = cls.from_pretrained(folder, dtype=torch.float32)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise UserError(f"cannot load {src.path}: {first_line(exc)}") from None
    try:
        norms = convert.convert_llama_norms_to_bhyt(model.eval(), lam_attn, lam_mlp, kappa, seq_len)
    except ValueError as exc:
        raise UserError(f"{src.path}: {exc}") from None
    try:
        model.save_pretrained(out)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot save the converted model to {out}: {first_line(exc)}") from None
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    cfg["vckattn_bhyt"] = {"kappa": kappa, "seq_len": seq_len}
    write_json(out / "config.json", cfg)
    try:
        AutoTokenizer.from_pretrained(folder).save_pretrained(out)
    except (OSError, ValueError, KeyError, TypeError):
        print(f"note: no tokenizer in {src.path}; `vckattn export` of a text model needs one in {out}")
    values = [(n.c_attn.item(), n.lam_attn.item(), n.lam_mlp.item()) for _, n in sorted(norms.items())]
    return out, values


def _convert_golden(path: Path, out: Path, seq_len: int, lam_attn: float, lam_mlp: float,
                    kappa: float) -> tuple[Path, list]:
    import torch

    from vckattn.golden.bhyt import c_attn_from_weights
    from vckattn.host.export import GOLDEN_KEY, check_golden_config, first_line, save_golden_checkpoint

    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unpickling problem is a user-input problem here
        raise UserError(f"{path}: cannot read as a PyTorch file ({first_line(exc)})") from None
    if not isinstance(ck, dict) or GOLDEN_KEY not in ck:
        raise UserError(f"{path}: not a vckattn golden checkpoint (no {GOLDEN_KEY!r} key)")
    config, state = ck.get("config"), ck.get("state_dict")
    check_golden_config(config)
    if config["family"] != "llama":
        raise UserError(f"{path}: a golden {config['family']!r} stack is not a Llama decoder; BHyT conversion needs "
                        "family 'llama'")
    block = dict(config["block"])
    if block.get("norm", "rmsnorm") != "rmsnorm":
        raise UserError(f"{path}: the blocks use norm {block.get('norm')!r}; BHyT conversion starts from 'rmsnorm'")
    n_heads = int(block["n_heads"])
    n_kv = int(block.get("n_kv_heads") or n_heads)
    new_block = {**block, "norm": "bhyt", "lam_attn": lam_attn, "lam_mlp": lam_mlp, "kappa": kappa,
                 "seq_len": seq_len}
    new_state, values = {}, []
    for k, v in state.items():
        rest = k.split(".", 2)
        if k.startswith("layers.") and rest[2] in ("norm1.weight", "norm2.weight"):
            site = "weight_attn" if rest[2] == "norm1.weight" else "weight_mlp"
            new_state[f"layers.{rest[1]}.bhyt.{site}"] = v.clone()
        else:
            new_state[k] = v
    for i in range(int(config["num_layers"])):
        c = c_attn_from_weights(state[f"layers.{i}.attn.v_proj.weight"], state[f"layers.{i}.attn.o_proj.weight"],
                                n_heads, n_kv, seq_len)
        dtype = state[f"layers.{i}.norm1.weight"].dtype
        new_state[f"layers.{i}.bhyt.c_attn"] = c.to(dtype)
        new_state[f"layers.{i}.bhyt.lam_attn"] = torch.tensor(lam_attn, dtype=dtype)
        new_state[f"layers.{i}.bhyt.lam_mlp"] = torch.tensor(lam_mlp, dtype=dtype)
        values.append((float(c), lam_attn, lam_mlp))
    target = out / GOLDEN_OUT
    save_golden_checkpoint(target, {**config, "block": new_block}, new_state)
    return target, values


def convert_bhyt(model: str | Path, out: str | Path, seq_len: int = DEFAULT_T, lam_attn: float = DEFAULT_LAM_ATTN,
                 lam_mlp: float = DEFAULT_LAM_MLP, kappa: float = DEFAULT_KAPPA, overwrite: bool = False) -> dict:
    """Convert ``model`` to BHyT into the folder ``out``; returns the report written to ``out/bhyt_convert.json``.

    ``report["checkpoint"]`` is what to pass to ``vckattn export`` (the folder, or ``out/model.pt``).
    Raises :class:`UserError` (one line) for a missing path, a non-Llama model or an unusable ``out``.
    """
    from vckattn.host.export import resolve_checkpoint

    text, out = str(model), Path(out)
    path = Path(text)
    if text not in ("smollm2",) and not path.exists():
        raise UserError(f"{text}: no such file or folder")
    if path.is_dir() and (path / "config.json").is_file():
        _check_llama_config(path, text)
    elif path.suffix.lower() == ".safetensors" and (path.parent / "config.json").is_file():
        _check_llama_config(path.parent, text)
    src = resolve_checkpoint(text)  # ExportError (a UserError) for unusable inputs
    if src.kind in ("state-dict",) and path.suffix.lower() not in (".pt", ".pth"):
        raise UserError(f"{text}: expected a golden checkpoint .pt, a Llama folder, a .gguf or smollm2")
    _prepare_out(out, overwrite)
    if src.kind == "state-dict":
        target, values = _convert_golden(src.path, out, seq_len, lam_attn, lam_mlp, kappa)
    else:
        target, values = _convert_hf(src, out, seq_len, lam_attn, lam_mlp, kappa)
    report = {"source": text, "source_kind": src.kind, "checkpoint": str(target), "kappa": kappa, "seq_len": seq_len,
              "lam_attn_init": lam_attn, "lam_mlp_init": lam_mlp,
              "c_attn_formula": "||W_V W_O||_F^2 / (T d), W_V GQA-expanded to all heads, T = seq_len",
              "layers": _layer_rows(values, kappa)}
    write_json(out / REPORT_NAME, report)
    return report


def format_table(report: dict) -> str:
    """The per-layer table printed by the command."""
    lines = [f"{'layer':>5}  {'c_attn':>12}  {'lam_A':>6}  {'lam_M':>6}  {'c*lam_A^2/k^2':>14}"]
    for r in report["layers"]:
        lines.append(f"{r['layer']:>5}  {r['c_attn']:12.6g}  {r['lam_attn']:6.3g}  {r['lam_mlp']:6.3g}  "
                     f"{r['var_increment']:14.6g}")
    return "\n".join(lines)


__all__ = ["DEFAULT_KAPPA", "DEFAULT_LAM_ATTN", "DEFAULT_LAM_MLP", "DEFAULT_T", "GOLDEN_OUT", "REPORT_NAME",
           "convert_bhyt", "format_table"]
