"""Deployment bundles: what the exporter writes and the host loads onto the device.

The full description: ``docs/internals/host.md``, section ``host/bundle.py``.
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import json
import math
import os
import re
import shutil
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from vckattn import __version__
from vckattn.golden.bhyt_int import NormFormat, bhyt_site_registers
from vckattn.golden.errors import EXIT_BUNDLE, UserError
from vckattn.golden.online_softmax_int import (
    P_ROUNDINGS,
    OnlineSoftmaxFormat,
    OnlineSoftmaxRegisters,
    online_softmax_registers,
)
from vckattn.golden.regmap import RegisterValues
from vckattn.golden.swiftmax_int import (
    HEAD_FIELDS,
    SwiftMaxFormat,
    SwiftMaxHeads,
    SwiftMaxRegisters,
    check_registers,
    fold_multiplier,
    saturation,
    swiftmax_head_registers,
)

SCHEMA_NAME = "vckattn.bundle"
#: 4: each layer's whole attention sublayer (``sublayer``: the residual add's registers, the encoder's LayerNorm,
#: the decoder's block-input scale and RoPE tables) and its formats (``formats.sublayer``); 3 (still read, without
#: sublayer constants): the whole-model export check (``model_fidelity``) and where each layer's SwiftMax β/γ came from
#: (``swiftmax.source``); 2 (still read): per-head SwiftMax constants (β, γ and the b_beta/c_out registers one per
#: query head), export warnings and the per-layer fidelity check; 1 (still read): one β/γ per layer, which means
#: the same constants for every head
SCHEMA_VERSION = 4
SUPPORTED_SCHEMA_VERSIONS: tuple[int, ...] = (1, 2, 3, 4)
SCHEMA_PATH = Path(__file__).with_name("bundle_schema.json")
MANIFEST_FILE = "manifest.json"
TENSORS_FILE = "tensors.safetensors"
#: safetensors header metadata key holding the sha256 of the manifest's canonical JSON
SEAL_KEY = "vckattn.manifest_sha256"
DTYPES: tuple[str, ...] = ("int8", "int16", "int32", "int64", "float32")
DEFAULT_FORMATS = {"int8": "Q8.0", "int16": "Q16.0", "int32": "Q32.0", "int64": "Q64.0", "float32": "float32"}
#: width of the requantization multipliers (golden ``requant_registers`` default: one DSP58 port)
REQUANT_BITS = 18
MAX_MANIFEST_BYTES = 64 << 20

_TENSOR_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/]{0,255}")
_FIXED_FORMAT = re.compile(r"(U?)Q(-?[0-9]{1,3})\.(-?[0-9]{1,3})")
_LAYER_TENSOR = re.compile(r"layers\.([0-9]+)\.")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


# --------------------------------------------------------------------------- errors and the bundle


class BundleError(UserError):
    """A bundle (or a bundle being written) is unusable. ``str(e)`` is one line:
    ``"<file>: <field>: <message>"`` (``"<file>: <message>"`` when no single field is at fault).

    Attributes:
        file: the file (or folder) at fault.
        field: where in it: a manifest path like ``layers[2].swiftmax.registers.a_shift``,
            ``tensors["layers.0.q_proj.weight"].shape``, or a tensor name; ``""`` for the whole file.
        message: what is wrong, and where it helps, what would be right.
    """

    exit_code = EXIT_BUNDLE

    def __init__(self, file: str | os.PathLike, field: str, message: str) -> None:
        self.file = _one_line(os.fspath(file))
        self.field = _one_line(field)
        self.message = _one_line(message)
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.field:
            return f"{self.file}: {self.field}: {self.message}"
        return f"{self.file}: {self.message}"

    def __reduce__(self):
        return (type(self), (self.file, self.field, self.message))


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) if ("\n" in str(text) or "\r" in str(text)) else str(text)


def _fail(file: str | os.PathLike, field: str, message: str) -> NoReturn:
    raise BundleError(file, field, message)


@dataclass(eq=False)
class Bundle:
    """A loaded, fully checked bundle. ``manifest`` is the parsed manifest.json; ``tensors`` maps
    every tensor name to its array (dtype and shape as recorded in the manifest)."""

    path: Path
    manifest: dict
    tensors: dict[str, np.ndarray]

    def layer(self, i: int) -> dict:
        """The manifest entry of layer ``i`` (0-based)."""
        layers = self.manifest["layers"]
        if isinstance(i, bool) or not isinstance(i, int | np.integer) or not 0 <= int(i) < len(layers):
            raise IndexError(f"{self.path}: no layer {i!r} (the bundle has layers 0..{len(layers) - 1})")
        return layers[int(i)]

    def tensor(self, name: str) -> np.ndarray:
        """The array of tensor ``name``."""
        try:
            return self.tensors[name]
        except KeyError:
            raise KeyError(f"{self.path}: no tensor {name!r} in the bundle") from None


# --------------------------------------------------------------------------- small helpers


def _field(path: tuple | list) -> str:
    """``("layers", 2, "swiftmax", "a_shift")`` -> ``layers[2].swiftmax.a_shift``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.fullmatch(str(p)):
            out += ("." if out else "") + str(p)
        else:
            out += f"[{json.dumps(str(p))}]"
    return out


def _jtype(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _short(v: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(v, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def tensor_sha256(a: np.ndarray) -> str:
    """sha256 (hex) of an array's raw little-endian bytes in C order (what the manifest records)."""
    a = np.asarray(a)
    le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False)
    return hashlib.sha256(le.tobytes()).hexdigest()


def _manifest_digest(manifest: dict) -> str:
    """sha256 of the manifest's canonical JSON (sorted keys, no whitespace): the seal."""
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def register_schema(values: type[RegisterValues]) -> dict:
    """The JSON Schema of a layer's register set, derived from the kernel's one declaration: every
    writable register of its map (an integer) and its host-side extras (``out_frac``: a shift)."""
    props: dict[str, dict] = {name: {"$ref": "#/$defs/register"} for name in values.names()}
    props.update({name: {"type": "integer", "minimum": -62, "maximum": 62} for name in values.extra})
    return {"type": "object", "additionalProperties": False, "required": list(values.names()), "properties": props}


@functools.lru_cache(maxsize=1)
def _schema() -> dict:
    """``bundle_schema.json`` with the register sets filled in from their declarations."""
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    sm = register_schema(SwiftMaxRegisters)
    for n in HEAD_FIELDS:  # schema 2: one entry per query head (schema 1: one value for every head)
        sm["properties"][n] = {"anyOf": [{"$ref": "#/$defs/register"}, {
            "type": "array", "minItems": 1, "maxItems": 4096, "items": {"$ref": "#/$defs/register"}}]}
    schema["$defs"]["swiftmax_registers"] = sm
    schema["$defs"]["online_softmax_registers"] = register_schema(OnlineSoftmaxRegisters)
    osm_fmt = schema["properties"]["formats"]["properties"]["online_softmax"]["properties"]
    osm_fmt["p_rounding"] = {"enum": list(P_ROUNDINGS)}
    return schema


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema
    from jsonschema.validators import Draft202012Validator

    # "integer" means a JSON integer literal (int), not 3.0: register values must be exact.
    checker = Draft202012Validator.TYPE_CHECKER.redefine("integer", lambda _c, v: _is_int(v))
    cls = jsonschema.validators.extend(Draft202012Validator, type_checker=checker)
    cls.check_schema(_schema())
    return cls(_schema())


def _hardware_formats() -> dict[str, dict]:
    """The numeric formats a bundle must match (SwiftMax's ``max_heads`` is a build parameter the bitstream
    manifest records, not a numeric format)."""
    sm = asdict(SwiftMaxFormat())
    sm.pop("max_heads")
    return {"swiftmax": sm, "online_softmax": asdict(OnlineSoftmaxFormat()), "norm": asdict(NormFormat())}


# --------------------------------------------------------------------------- manifest checks


def _validate_manifest(m: Any, file: Path) -> None:
    """Every check of manifest.json on its own (before the tensors are looked at)."""
    if not isinstance(m, dict):
        _fail(file, "", f"top level must be a JSON object, got {_jtype(m)}")
    _check_header(m, file)
    _check_finite(m, (), file)
    _check_schema(m, file)
    _check_semantics(m, file)


def _check_header(m: dict, file: Path) -> None:
    supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
    if "schema" not in m:
        _fail(file, "schema", f'missing: not a vckattn bundle manifest (expected "schema": "{SCHEMA_NAME}")')
    if m["schema"] != SCHEMA_NAME:
        _fail(file, "schema", f'unknown schema {_short(m["schema"])}: not a vckattn bundle manifest '
                              f'(expected "{SCHEMA_NAME}")')
    if "schema_version" not in m:
        _fail(file, "schema_version", f"missing (this vckattn {__version__} reads schema_version {supported})")
    v = m["schema_version"]
    if not _is_int(v):
        _fail(file, "schema_version", f"must be an integer, got {_short(v)} "
                                      f"(this vckattn {__version__} reads schema_version {supported})")
    if v not in SUPPORTED_SCHEMA_VERSIONS:
        hint = "; it was written by a newer vckattn: upgrade vckattn" if v > max(SUPPORTED_SCHEMA_VERSIONS) else ""
        _fail(file, "schema_version",
              f"unsupported schema_version {v}: this vckattn {__version__} reads schema_version {supported}{hint}")


def _check_finite(v: Any, path: tuple, file: Path) -> None:
    if isinstance(v, float):
        if not math.isfinite(v):
            _fail(file, _field(path), f"must be a finite number, got {v}")
    elif isinstance(v, dict):
        for k, x in v.items():
            _check_finite(x, path + (k,), file)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            _check_finite(x, path + (i,), file)


_PATTERN_MESSAGES = {
    "^[0-9a-f]{64}$": "must be a sha256 digest (64 lowercase hex digits)",
    "utc_time": "must be an ISO 8601 UTC time like 2026-01-31T12:00:00Z",
    "^[A-Za-z0-9_][A-Za-z0-9_.\\-/]{0,255}$": "must be a tensor name (letters, digits, _ . - /; at most 256 "
                                              "characters; not starting with . - /)",
    "^(float32|U?Q-?[0-9]{1,3}\\.-?[0-9]{1,3})$": "must be float32 or a fixed-point format like Q8.0 or UQ0.8",
}


def _check_schema(m: dict, file: Path) -> None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(m))
    if error is None:
        return
    path = tuple(error.absolute_path)
    inst = error.instance
    kind = error.validator
    value = error.validator_value
    if kind == "required":
        missing = [k for k in value if isinstance(inst, dict) and k not in inst]
        _fail(file, _field(path + (missing[0],)) if missing else _field(path), "missing (required field)")
    if kind == "additionalProperties" and isinstance(inst, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = [k for k in inst if k not in allowed]
        if allowed:
            _fail(file, _field(path + (extra[0],)) if extra else _field(path),
                  f"unknown field (allowed here: {', '.join(sorted(allowed))})")
    if "propertyNames" in error.absolute_schema_path:
        _fail(file, _field(path + (str(inst),)), "invalid tensor name (letters, digits, _ . - /; at most 256 "
                                                 "characters; not starting with . - /)")
    got = "got null" if inst is None else f"got {_jtype(inst)} {_short(inst)}"
    if kind == "type":
        types = value if isinstance(value, list) else [value]
        msg = f"must be {' or '.join(types)}, {got}"
    elif kind == "enum":
        msg = f"must be one of {', '.join(_short(x) for x in value)}; got {_short(inst)}"
    elif kind == "const":
        msg = f"must be {_short(value)}; got {_short(inst)}"
    elif kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}[kind]
        msg = f"must be {op} {value}; got {_short(inst)}"
    elif kind == "pattern":
        key = "utc_time" if "utc_time" in error.absolute_schema_path or "created" in path else value
        msg = f"{_PATTERN_MESSAGES.get(key, f'must match {value}')}; got {_short(inst)}"
    elif kind in ("minItems", "maxItems"):
        msg = f"must have {'at least' if kind == 'minItems' else 'at most'} {value} items; got {len(inst)}"
    elif kind in ("minLength", "maxLength"):
        msg = f"must be {'at least' if kind == 'minLength' else 'at most'} {value} characters long; got {len(inst)}"
    elif kind == "uniqueItems":
        msg = "must not list a name twice"
    elif kind == "additionalProperties":
        msg = "has unexpected fields"
    else:
        msg = error.message
    _fail(file, _field(path), msg)


def _check_formats(got: Any, want: dict, path: tuple, file: Path) -> None:
    """The bundle's hardware formats must be the ones this vckattn's kernels are built with."""
    for k, w in want.items():
        g = got[k]
        if isinstance(w, dict):
            _check_formats(g, w, path + (k,), file)
        elif g != w or type(g) is not type(w):
            _fail(file, _field(path + (k,)),
                  f"= {_short(g)}, but this vckattn's kernels are built with {_short(w)} "
                  f"(a bundle must match the hardware formats)")


def _fixed_format(fmt: str) -> tuple[str, int, int] | None:
    """``'Q8.0'`` -> (storage dtype, min, max); None for ``'float32'``; ValueError if not representable."""
    if fmt == "float32":
        return None
    mt = _FIXED_FORMAT.fullmatch(fmt)
    if mt is None:
        raise ValueError(f"format {fmt!r} is neither float32 nor a fixed-point format like Q8.0 / UQ0.8")
    unsigned = mt.group(1) == "U"
    bits = int(mt.group(2)) + int(mt.group(3))
    if unsigned:
        if not 1 <= bits <= 63:
            raise ValueError(f"format {fmt} has {bits} bits; unsigned formats need 1..63 (stored in a signed dtype)")
        lo, hi = 0, (1 << bits) - 1
        container = next(c for c in (8, 16, 32, 64) if bits <= c - 1)
    else:
        if not 2 <= bits <= 64:
            raise ValueError(f"format {fmt} has {bits} bits; signed formats need 2..64")
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
        container = next(c for c in (8, 16, 32, 64) if bits <= c)
    return f"int{container}", lo, hi


def _check_semantics(m: dict, file: Path) -> None:
    """What JSON Schema cannot express (the manifest already matches the schema)."""
    _check_formats(m["formats"], _hardware_formats(), ("formats",), file)
    try:
        created = datetime.datetime.fromisoformat(m["created"].replace("Z", "+00:00"))
    except ValueError:
        created = None
    if created is None:
        _fail(file, "created", f"not a valid date and time: {_short(m['created'])}")

    model, layers, tensors = m["model"], m["layers"], m["tensors"]
    if model["num_layers"] != len(layers):
        _fail(file, "model.num_layers", f"= {model['num_layers']}, but the manifest lists {len(layers)} layers")
    if model["num_heads"] % model["num_kv_heads"]:
        _fail(file, "model.num_kv_heads",
              f"= {model['num_kv_heads']} does not divide num_heads = {model['num_heads']} (grouped-query attention)")

    # tensors: declared format vs dtype, scale references
    for name, t in tensors.items():
        base = ("tensors", name)
        try:
            spec = _fixed_format(t["format"])
        except ValueError as exc:
            _fail(file, _field(base + ("format",)), str(exc))
        need = "float32" if spec is None else spec[0]
        if t["dtype"] != need:
            _fail(file, _field(base + ("dtype",)), f"= {t['dtype']}, but format {t['format']} is stored as {need}")
        scale = t["scale"]
        if spec is None and scale is not None:
            _fail(file, _field(base + ("scale",)), f"a float32 tensor has no quantization scale: must be null, "
                                                   f"got {_short(scale)}")
        if isinstance(scale, str):
            if scale not in tensors:
                _fail(file, _field(base + ("scale",)), f"refers to tensor {scale!r}, which is not in the bundle")
            st = tensors[scale]
            if st["dtype"] != "float32" or len(st["shape"]) != 1:
                _fail(file, _field(base + ("scale",)),
                      f"scale tensor {scale!r} must be 1-D float32 (one scale per output channel); it is "
                      f"{st['dtype']} of shape {st['shape']}")
            if not t["shape"] or st["shape"][0] != t["shape"][0]:
                _fail(file, _field(base + ("scale",)),
                      f"scale tensor {scale!r} has {st['shape'][0]} entries but this tensor of shape {t['shape']} "
                      f"has {t['shape'][0] if t['shape'] else 'no'} output channels (axis 0)")

    version = m["schema_version"]
    for j, layer in enumerate(layers):
        if version < 4 and "sublayer" in layer:
            _fail(file, _field(("layers", j, "sublayer")),
                  f"sublayer constants need schema_version 4 (this manifest says {version})")
    if version < 4 and "sublayer" in m["formats"]:
        _fail(file, "formats.sublayer", f"the sublayer's formats need schema_version 4 (this manifest says {version})")
    if any(layer.get("sublayer") is not None for layer in layers) and "sublayer" not in m["formats"]:
        _fail(file, "formats.sublayer", "missing: a bundle with sublayer constants records the sublayer's formats")
    if "sublayer" in m["formats"]:
        _check_formats(m["formats"]["sublayer"], sublayer_formats(), ("formats", "sublayer"), file)
    for i, layer in enumerate(layers):
        _check_layer(m, i, layer, file)

    for name in tensors:
        mt = _LAYER_TENSOR.match(name)
        if mt is not None:
            i = int(mt.group(1))
            if i >= len(layers) or name not in layers[i]["tensors"]:
                _fail(file, _field(("tensors", name)),
                      f"is named as a tensor of layer {i} but is not listed in layers[{i}].tensors")
    for key, what in (("model_fidelity", "the whole-model check"),):
        if version < 3 and key in m:
            _fail(file, key, f"{what} needs schema_version 3 (this manifest says {version})")
    if version < 3 and any((layer.get("swiftmax") or {}).get("source") is not None for layer in m["layers"]):
        _fail(file, "layers", f"swiftmax.source needs schema_version 3 (this manifest says {version})")
    fid = m.get("model_fidelity")
    if fid is not None:
        present = {int(layer["index"]) for layer in m["layers"]}
        stray = sorted(set(fid["layers"]) - present)
        if stray:
            _fail(file, "model_fidelity.layers", f"names layer(s) {stray}, which the bundle does not have")


def _reg_mismatch(file: Path, base: tuple, stored: dict, want: dict, source: str) -> None:
    """Registers must equal what the constant function gives, bit for bit (no tolerance)."""
    for k, w in want.items():
        g = stored[k]
        if g != w:
            _fail(file, _field(base + (k,)),
                  f"= {g}, but {source} gives {w}: the registers must be computed from the layer's constants")


def _check_layer(m: dict, i: int, layer: dict, file: Path) -> None:
    model, tensors = m["model"], m["tensors"]
    base = ("layers", i)
    n = len(m["layers"])
    if layer["index"] != i:
        _fail(file, _field(base + ("index",)),
              f"= {layer['index']}, expected {i} (layers are listed in order 0..{n - 1})")
    prefix = f"layers.{i}."
    for j, name in enumerate(layer["tensors"]):
        if name not in tensors:
            _fail(file, _field(base + ("tensors", j)), f"tensor {name!r} is not in the bundle's tensors")
        if not name.startswith(prefix):
            _fail(file, _field(base + ("tensors", j)), f"tensor {name!r} of layer {i} must be named {prefix}*")

    scales = layer["scales"]
    s_q, s_k, s_v, s_a = scales["s_q"], scales["s_k"], scales["s_v"], scales["s_a"]
    d = model["head_dim"]
    p_frac = layer["p_frac"]
    sm, osm = layer["swiftmax"], layer["online_softmax"]
    if (sm is None) == (osm is None):
        _fail(file, _field(base + ("swiftmax",)), "exactly one of swiftmax and online_softmax must be set "
                                                  f"(the other null); got {'both' if sm else 'neither'}")
    if sm is not None:
        if m["normalizer"] == "softmax":
            _fail(file, _field(base + ("swiftmax",)), 'the model\'s normalizer is "softmax": its layers have no '
                                                      "SwiftMax constants (use online_softmax)")
        n_heads = model["num_heads"]
        fmt = SwiftMaxFormat(max_heads=1 << max(n_heads - 1, 0).bit_length())  # the build's count: check_bundle
        regs = sm["registers"]
        rbase = base + ("swiftmax", "registers")
        version = m["schema_version"]
        for name, where in (("beta", base + ("swiftmax", "beta")), ("gamma", base + ("swiftmax", "gamma")),
                            *((n, rbase + (n,)) for n in HEAD_FIELDS)):
            v = sm[name] if name in ("beta", "gamma") else regs[name]
            if version == 1 and isinstance(v, list):
                _fail(file, _field(where), "per-head values need schema_version 2 (schema 1 has one value per layer)")
            if version >= 2 and (not isinstance(v, list) or len(v) != n_heads):
                _fail(file, _field(where), f"schema_version {version} needs one value per query head ({n_heads}, "
                                           f"model.num_heads); got {_short(v)}")
        try:
            heads = SwiftMaxHeads.from_dict(regs, n_heads)
            check_registers(heads, fmt)
        except ValueError as exc:
            words = str(exc).split()
            name = words[2].rstrip(":") if words[:1] == ["head"] and len(words) > 2 else words[0]
            _fail(file, _field(rbase + ((name,) if name in regs else ())), str(exc))
        if regs["out_frac"] != p_frac:
            _fail(file, _field(rbase + ("out_frac",)),
                  f"= {regs['out_frac']}, but p_frac = {p_frac} (P's scale 2^-p_frac is the kernel's output scale)")
        if "p_max" in sm and sm["p_max"] != saturation(p_frac, fmt):
            _fail(file, _field(base + ("swiftmax", "p_max")),
                  f"= {_short(sm['p_max'])}, but the kernel saturates at (2^{fmt.out_bits} - 1)·2^-p_frac = "
                  f"{saturation(p_frac, fmt)!r} (p_frac {p_frac}): the float SwiftMax must saturate where the kernel "
                  "does")
        try:
            want = swiftmax_head_registers(s_q, s_k, d, sm["beta"], sm["gamma"], p_frac, n_heads, fmt).as_dict()
        except ValueError as exc:
            _fail(file, _field(base + ("swiftmax",)), f"beta/gamma/s_q/s_k give no representable registers: {exc}")
        _reg_mismatch(file, rbase, heads.as_dict(), want,
                      "swiftmax_head_registers(s_q, s_k, model.head_dim, beta, gamma, p_frac)")
    else:
        fmt = OnlineSoftmaxFormat()
        regs = osm["registers"]
        rbase = base + ("online_softmax", "registers")
        a_max = (1 << (fmt.a_bits - 1)) - 1
        if not 1 <= regs["a_mult"] <= a_max:
            _fail(file, _field(rbase + ("a_mult",)),
                  f"{regs['a_mult']} outside 1..{a_max} (positive, {fmt.a_bits}-bit signed register)")
        shift_max = fmt.acc_bits + fmt.a_bits - 1
        if not 0 <= regs["a_shift"] <= shift_max:
            _fail(file, _field(rbase + ("a_shift",)), f"{regs['a_shift']} outside 0..{shift_max}")
        if p_frac != fmt.out_frac:
            _fail(file, _field(base + ("p_frac",)),
                  f"= {p_frac}, but the online-softmax kernel's output P is UQ0.{fmt.out_frac} (p_frac {fmt.out_frac})")
        try:
            want = online_softmax_registers(s_q, s_k, d, fmt).as_dict()
        except ValueError as exc:
            _fail(file, _field(base + ("online_softmax",)), f"s_q/s_k give no representable registers: {exc}")
        _reg_mismatch(file, rbase, regs, want, "online_softmax_registers(s_q, s_k, model.head_dim)")

    # requantization: q/k/v per channel (tensors), a per tensor (scalars)
    rq = layer["requant"]
    channels = {"q": model["num_heads"] * d, "k": model["num_kv_heads"] * d, "v": model["num_kv_heads"] * d}
    for which in ("q", "k", "v"):
        for part in ("mult", "shift"):
            name = rq[which][part]
            f = _field(base + ("requant", which, part))
            if name not in tensors:
                _fail(file, f, f"refers to tensor {name!r}, which is not in the bundle")
            if name not in layer["tensors"]:
                _fail(file, f, f"tensor {name!r} is not listed in layers[{i}].tensors")
            t = tensors[name]
            if t["dtype"] == "float32":
                _fail(file, f, f"tensor {name!r} must hold integer registers, not float32")
            if t["shape"] != [channels[which]]:
                _fail(file, f, f"tensor {name!r} has shape {t['shape']}, expected [{channels[which]}] "
                               f"(one register per output channel of the {which} projection)")
    a = rq["a"]
    ratio = s_v * 2.0**-p_frac / s_a
    try:
        mult, shift = fold_multiplier(ratio, REQUANT_BITS)
    except ValueError as exc:
        _fail(file, _field(base + ("requant", "a")), f"s_v·2^-p_frac/s_a = {ratio:g} cannot be requantized: {exc}")
    _reg_mismatch(file, base + ("requant", "a"), a, {"shift": shift, "mult": mult},
                  "requant_registers(s_v·2^-p_frac/s_a)")

    _check_bhyt(m, i, layer, file)
    _check_sublayer(m, i, layer, file)


def _check_bhyt(m: dict, i: int, layer: dict, file: Path) -> None:
    base = ("layers", i, "bhyt")
    bh = layer["bhyt"]
    if m["norm"] != "bhyt":
        if bh is not None:
            _fail(file, _field(base), f'the model\'s norm is "{m["norm"]}": must be null')
        return
    if bh is None:
        _fail(file, _field(base), 'the model\'s norm is "bhyt": every layer needs its BHyT block constants')
    fmt = NormFormat()
    k_max = (1 << (fmt.k_bits - 1)) - 1
    stat_max = (1 << fmt.stat_bits) - 1
    for site in ("site_a", "site_m"):
        s = bh[site]
        if not 1 <= s["k_mult"] <= k_max:
            _fail(file, _field(base + (site, "k_mult")),
                  f"{s['k_mult']} outside 1..{k_max} (positive, {fmt.k_bits}-bit signed register)")
        for k in ("eps_int", "c_int"):
            if not 0 <= s[k] <= stat_max:
                _fail(file, _field(base + (site, k)), f"{s[k]} outside 0..2^{fmt.stat_bits}-1 "
                                                      f"(unsigned, the {fmt.stat_bits}-bit statistic)")
    if bh["site_a"]["c_int"] != 0:
        _fail(file, _field(base + ("site_a", "c_int")),
              f"= {bh['site_a']['c_int']}, must be 0 (site A uses its own exact statistic)")
    if bh["site_m"]["eps_int"] != bh["site_a"]["eps_int"]:
        _fail(file, _field(base + ("site_m", "eps_int")),
              f"= {bh['site_m']['eps_int']}, but site_a.eps_int = {bh['site_a']['eps_int']} (both sites normalize "
              f"by the block input's statistic, same ε and scale)")
    if bh["c_attn"] == 0 and bh["site_m"]["c_int"] != 0:
        _fail(file, _field(base + ("site_m", "c_int")), f"= {bh['site_m']['c_int']}, but c_attn is 0")
    d = m["model"]["hidden_size"]
    try:
        want = bhyt_site_registers(bh["lam_attn"], bh["kappa"], np.zeros(d), d, 1.0, 1.0, fmt=fmt)
    except ValueError as exc:
        _fail(file, _field(base), f"lam_attn/kappa give no representable site-A registers: {exc}")
    _reg_mismatch(file, base + ("site_a",), bh["site_a"], {"k_shift": want.k_shift, "k_mult": want.k_mult},
                  "bhyt_site_registers(lam_attn, kappa, d=model.hidden_size, s_in=s_stat)")


def sublayer_formats() -> dict:
    """The sublayer's formats a bundle records (``formats.sublayer``): golden's :data:`SUBLAYER_FORMAT` without its
    ``norm`` (that is ``formats.norm``)."""
    from vckattn.golden.sublayer import SUBLAYER_FORMAT  # imports torch: only for bundles with a sublayer

    fmt = asdict(SUBLAYER_FORMAT)
    fmt.pop("norm")
    return fmt


def sublayer_kind(family: str, norm: str) -> str | None:
    """The sublayer golden declares for a model: ``encoder`` (post-LN BERT: LayerNorm), ``decoder`` (a BHyT Llama),
    or None (a ViT, a Llama without BHyT: no sublayer declaration)."""
    if family == "bert" and norm == "layernorm":
        return "encoder"
    if family == "llama" and norm == "bhyt":
        return "decoder"
    return None


def rope_format(frac: int) -> str:
    """The bundle format of the int16 RoPE tables with ``frac`` fractional bits (Q1.14 is ``Q2.14``: 16 bits)."""
    return f"Q{16 - frac}.{frac}"


def _an(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


_SUBLAYER_FIELDS = {"encoder": ("layernorm",), "decoder": ("s_h", "bhyt_eps", "rope")}


def _check_sublayer(m: dict, i: int, layer: dict, file: Path) -> None:
    """A layer's ``sublayer`` entry against the model and the layer's other constants (manifest only; the registers
    held in tensors are checked by :func:`_check_sublayer_tensors`)."""
    sub = layer.get("sublayer")
    if sub is None:
        return
    base = ("layers", i, "sublayer")
    model, tensors = m["model"], m["tensors"]
    family, norm = model["family"], m["norm"]
    want = sublayer_kind(family, norm)
    if want is None:
        _fail(file, _field(base), f'a {family} model with norm "{norm}" has no sublayer declaration (post-LN BERT '
                                  "encoders and BHyT Llama decoders have one): must be absent")
    kind = sub["kind"]
    if kind != want:
        _fail(file, _field(base + ("kind",)), f'= "{kind}", but a {family} model with norm "{norm}" has {_an(want)} '
                                              "sublayer")
    other = "decoder" if kind == "encoder" else "encoder"
    for key in _SUBLAYER_FIELDS[kind]:
        if key not in sub:
            _fail(file, _field(base + (key,)), f"missing (required in {_an(kind)} sublayer)")
    for key in _SUBLAYER_FIELDS[other]:
        if key in sub:
            _fail(file, _field(base + (key,)), f"{_an(kind)} sublayer has no {key} (a field of the {other} sublayer)")
    d = model["hidden_size"]

    def ref(path: tuple, name: str, dtypes: tuple[str, ...], shape: list[int], fmt: str | None = None,
            listed: bool = True) -> None:
        f = _field(base + path)
        if name not in tensors:
            _fail(file, f, f"refers to tensor {name!r}, which is not in the bundle")
        if listed and name not in layer["tensors"]:
            _fail(file, f, f"tensor {name!r} is not listed in layers[{i}].tensors")
        t = tensors[name]
        if t["dtype"] not in dtypes or t["shape"] != shape or (fmt is not None and t["format"] != fmt):
            _fail(file, f, f"tensor {name!r} is {t['dtype']} {t['format']} of shape {t['shape']}; expected "
                           f"{' or '.join(dtypes)}{'' if fmt is None else ' ' + fmt} of shape {shape}")

    o_w = tensor_name_of(i, "o_proj.weight")
    if o_w not in tensors or not isinstance(tensors[o_w]["scale"], str):
        _fail(file, _field(base + ("residual", "rq_y")), f"the residual's registers derive from the W_O scales: the "
                                                         f"bundle needs {o_w!r} with a per-channel scale tensor")
    ints = tuple(_INT_BITS)
    for part in ("mult", "shift"):
        ref(("residual", "rq_y", part), sub["residual"]["rq_y"][part], ints, [d])
    if kind == "encoder":
        for part in ("weight", "bias"):
            ref(("layernorm", part), sub["layernorm"][part], ("float32",), [d])
        return
    frac = m["formats"]["sublayer"]["rope_frac"]
    for part in ("cos", "sin"):
        ref(("rope", part), sub["rope"][part], ("int16",), [model["max_seq_len"], model["head_dim"]],
            rope_format(frac), listed=False)
    bh = layer["bhyt"]
    bbase = ("layers", i, "bhyt")
    s_x = layer["scales"]["s_x"]
    if bh["site_a"]["s_out"] != s_x:
        _fail(file, _field(bbase + ("site_a", "s_out")),
              f"= {bh['site_a']['s_out']!r}, but scales.s_x = {s_x!r}: site A writes the attention input, so its "
              "output scale is the attention layer's s_x")
    s_h, eps, s_mid = sub["s_h"], sub["bhyt_eps"], sub["residual"]["s_out"]
    fmt = NormFormat()
    try:
        a = bhyt_site_registers(bh["lam_attn"], bh["kappa"], np.zeros(d), d, s_h, s_h, s_x, eps=eps, fmt=fmt)
        mm = bhyt_site_registers(bh["lam_mlp"], bh["kappa"], np.zeros(d), d, s_mid, s_h, 1.0, c_attn=bh["c_attn"],
                                 lam_attn=bh["lam_attn"], eps=eps, fmt=fmt)
    except ValueError as exc:
        _fail(file, _field(base + ("s_h",)), f"gives no representable BHyT site registers: {exc}")
    _reg_mismatch(file, bbase + ("site_a",), bh["site_a"], {k: a.scalars()[k] for k in ("eps_int", "k_mult")},
                  "bhyt_site_registers(lam_attn, kappa, d, s_in = s_stat = sublayer.s_h, eps = sublayer.bhyt_eps)")
    _reg_mismatch(file, bbase + ("site_m",), bh["site_m"],
                  {k: mm.scalars()[k] for k in ("eps_int", "c_int", "k_shift", "k_mult")},
                  "bhyt_site_registers(lam_mlp, kappa, d, s_in = sublayer.residual.s_out, s_stat = sublayer.s_h, "
                  "c_attn, lam_attn, eps = sublayer.bhyt_eps)")


def tensor_name_of(i: int, what: str) -> str:
    """Layer ``i``'s tensor ``what``: ``layers.{i}.{what}`` (the exporter's names)."""
    return f"layers.{i}.{what}"


def _check_sublayer_tensors(m: dict, arrays: dict[str, np.ndarray], file: Path) -> None:
    """The sublayer's registers against golden's derivation from the stored scales, exactly, and the RoPE tables."""
    if all(layer.get("sublayer") is None for layer in m["layers"]):
        return
    from vckattn.golden.sublayer import SUBLAYER_FORMAT, residual_registers  # imports torch

    fmt = SUBLAYER_FORMAT
    for i, layer in enumerate(m["layers"]):
        sub = layer.get("sublayer")
        if sub is None:
            continue
        base = ("layers", i, "sublayer")
        res = sub["residual"]
        s_res = layer["scales"]["s_x"] if sub["kind"] == "encoder" else sub["s_h"]
        s_w = arrays[m["tensors"][tensor_name_of(i, "o_proj.weight")]["scale"]].astype(np.float64)
        try:
            want = residual_registers(layer["scales"]["s_a"] * s_w, s_res, res["s_out"], fmt)
        except ValueError as exc:
            _fail(file, _field(base + ("residual", "s_out")), f"gives no representable residual registers: {exc}")
        source = ("residual_registers(s_a·o_proj.weight_scale, " + ("scales.s_x" if sub["kind"] == "encoder" else
                                                                   "sublayer.s_h") + ", residual.s_out)")
        _reg_mismatch(file, base + ("residual", "rq_x"), res["rq_x"],
                      {"mult": int(want.rq_x.mult), "shift": int(want.rq_x.shift)}, source)
        for part in ("mult", "shift"):
            got = arrays[res["rq_y"][part]].astype(np.int64)
            w = np.asarray(getattr(want.rq_y, part), np.int64)
            bad = np.flatnonzero(got != w)
            if bad.size:
                j = int(bad[0])
                _fail(file, _field(base + ("residual", "rq_y", part)),
                      f"channel {j} = {int(got[j])}, but {source} gives {int(w[j])} ({bad.size} of {w.size} channels "
                      "differ): the registers must be computed from the layer's constants")
        if sub["kind"] == "decoder":
            _check_rope(arrays[sub["rope"]["cos"]], arrays[sub["rope"]["sin"]], fmt.rope_frac, base + ("rope",), file)


def _check_rope(c: np.ndarray, s: np.ndarray, frac: int, base: tuple, file: Path) -> None:
    """Int16 RoPE tables ``(positions, D)`` with ``frac`` fractional bits: rotate-half layout (the two halves of a
    row equal), position 0 the identity, and every (cos, sin) pair a rotation within the tables' rounding
    (``|c² + s² − 2^(2·frac)| ≤ √2·2^frac + 64``: half an LSB each, and float32 tables' own rounding)."""
    one = 1 << frac
    c64, s64 = c.astype(np.int64), s.astype(np.int64)
    h = c.shape[1] // 2
    for name, t in (("cos", c64), ("sin", s64)):
        if t.size and int(np.abs(t).max()) > one:
            _fail(file, _field(base + (name,)), f"values beyond ±2^{frac} (±1 in Q1.{frac})")
        if c.shape[1] % 2 or not np.array_equal(t[:, :h], t[:, h:]):
            _fail(file, _field(base + (name,)), "the two halves of each position's row must be equal (rotate-half "
                                                "RoPE: one angle per pair of dimensions)")
    for name, t, want in (("cos", c64, one), ("sin", s64, 0)):
        if t.shape[0] and np.any(t[0] != want):
            _fail(file, _field(base + (name,)), f"position 0 must be the identity (cos 2^{frac}, sin 0)")
    norm2 = c64 * c64 + s64 * s64
    dev = np.abs(norm2 - one * one)
    if dev.size and float(dev.max()) > math.sqrt(2.0) * one + 64:
        p, j = (int(v) for v in np.argwhere(dev == dev.max())[0])
        _fail(file, _field(base + ("sin",)), f"position {p}, dimension {j}: cos² + sin² = {int(norm2[p, j])}, not "
                                             f"2^{2 * frac} within the rounding: the tables are not rotations")


# --------------------------------------------------------------------------- tensor checks


def _check_tensor_data(m: dict, arrays: dict[str, np.ndarray], file: Path) -> None:
    """Content checks shared by write and load (arrays already match the manifest's names/dtypes/shapes)."""
    tensors = m["tensors"]
    for name, t in tensors.items():
        a = arrays[name]
        if a.dtype.kind == "f":
            bad = ~np.isfinite(a)
            if bad.any():
                idx = tuple(int(x) for x in np.argwhere(bad)[0])
                _fail(file, name, f"contains {a[idx]} at index {list(idx)} (float tensors must be finite)")
            continue
        lo_hi = _fixed_format(t["format"])
        if lo_hi is not None and a.size:
            _, lo, hi = lo_hi
            amin, amax = int(a.min()), int(a.max())
            if amin < lo or amax > hi:
                _fail(file, name, f"values {amin}..{amax} outside its format {t['format']} ({lo}..{hi})")
    for name, t in tensors.items():
        if isinstance(t["scale"], str):
            s = arrays[t["scale"]]
            if s.size and not (s > 0).all():
                idx = int(np.argwhere(~(s > 0))[0][0])
                _fail(file, t["scale"], f"per-channel scales (of {name}) must be > 0; found {s[idx]} at index {idx}")
    mult_max = (1 << (REQUANT_BITS - 1)) - 1
    for i, layer in enumerate(m["layers"]):
        for which in ("q", "k", "v"):
            refs = layer["requant"][which]
            for part, lo, hi in (("mult", 1, mult_max), ("shift", 0, 62)):
                a = arrays[refs[part]]
                if a.size and (int(a.min()) < lo or int(a.max()) > hi):
                    bad = int(np.argwhere((a < lo) | (a > hi))[0][0])
                    _fail(file, refs[part], f"requant {part} registers of layers[{i}].requant.{which} must be in "
                                            f"{lo}..{hi}; found {int(a[bad])} at index {bad}")
    _check_sublayer_tensors(m, arrays, file)


def _check_tensor_files(m: dict, arrays: dict[str, np.ndarray], file: Path) -> None:
    """The tensors file holds exactly the manifest's tensors, with its dtypes, shapes and hashes."""
    declared = m["tensors"]
    for name in declared:
        if name not in arrays:
            _fail(file, name, f"listed in {MANIFEST_FILE} but missing from {TENSORS_FILE}")
    for name in arrays:
        if name not in declared:
            _fail(file, name, f"in {TENSORS_FILE} but not listed in {MANIFEST_FILE}")
    for name, t in declared.items():
        a = arrays[name]
        if a.dtype.name != t["dtype"]:
            _fail(file, name, f"stored as {a.dtype.name}, but {MANIFEST_FILE} says {t['dtype']}")
        if list(a.shape) != t["shape"]:
            _fail(file, name, f"has shape {list(a.shape)}, but {MANIFEST_FILE} says {t['shape']}")
        digest = tensor_sha256(a)
        if digest != t["sha256"]:
            _fail(file, name, f"sha256 {digest[:16]}… does not match {MANIFEST_FILE} ({t['sha256'][:16]}…): "
                              f"the tensor data is corrupted or was changed")


# --------------------------------------------------------------------------- load


def load_bundle(path: str | os.PathLike) -> Bundle:
    """Load and check a bundle folder. Raises :class:`BundleError` (and nothing else) if anything is wrong."""
    path = Path(path)
    where = [path]
    try:
        return _load(path, where)
    except BundleError:
        raise
    except Exception as exc:  # never a bare traceback: name the file being read
        raise BundleError(where[0], "", f"cannot read ({type(exc).__name__}: {exc})") from exc


def _load(path: Path, where: list) -> Bundle:
    if not path.exists():
        _fail(path, "", "no such bundle folder")
    if not path.is_dir():
        _fail(path, "", f"not a folder (a bundle is a folder holding {MANIFEST_FILE} and {TENSORS_FILE})")
    mfile, tfile = path / MANIFEST_FILE, path / TENSORS_FILE
    for f in (mfile, tfile):
        if not f.exists():
            _fail(f, "", f"missing (a bundle folder holds {MANIFEST_FILE} and {TENSORS_FILE})")
        if not f.is_file():
            _fail(f, "", "not a regular file")
    where[0] = mfile
    manifest = _read_manifest(mfile)
    _validate_manifest(manifest, mfile)
    where[0] = tfile
    arrays, metadata = _read_tensors(tfile)
    _check_tensor_files(manifest, arrays, tfile)
    _check_tensor_data(manifest, arrays, tfile)
    sealed = metadata.get(SEAL_KEY)
    if sealed is None:
        _fail(tfile, f"__metadata__[{json.dumps(SEAL_KEY)}]",
              f"missing: no manifest seal (a bundle's {TENSORS_FILE} is written by vckattn write_bundle)")
    digest = _manifest_digest(manifest)
    if sealed != digest:
        _fail(mfile, "", f"does not match the manifest sealed into {TENSORS_FILE} at export (sha256 {digest[:16]}…, "
                         f"sealed {_short(sealed, 20)}): {MANIFEST_FILE} was edited after export, or the two files "
                         f"come from different exports; re-export the bundle")
    return Bundle(path=path, manifest=manifest, tensors=arrays)


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _read_manifest(file: Path) -> dict:
    size = file.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        _fail(file, "", f"{size} bytes: too large for a manifest (at most {MAX_MANIFEST_BYTES})")
    data = file.read_bytes()
    if not data.strip():
        _fail(file, "", "empty (truncated?)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        _fail(file, "", f"not UTF-8 text (byte {exc.start})")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as exc:
        _fail(file, str(exc), "the same key appears twice in one JSON object")
    except json.JSONDecodeError as exc:
        end = exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
        _fail(file, "", f"not valid JSON{' (truncated?)' if end else ''}: {exc.msg} (line {exc.lineno}, "
                        f"column {exc.colno})")
    except RecursionError:
        _fail(file, "", "not valid JSON: nested too deeply")


def _read_tensors(file: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    from safetensors import safe_open

    try:
        handle = safe_open(os.fspath(file), framework="numpy")
    except Exception as exc:  # SafetensorError, OSError, ... whatever safetensors raises
        _fail(file, "", f"not a readable safetensors file ({_safetensors_message(exc)})")
    arrays: dict[str, np.ndarray] = {}
    with handle as f:
        try:
            metadata = f.metadata() or {}
            names = list(f.keys())
        except Exception as exc:
            _fail(file, "", f"not a readable safetensors file ({_safetensors_message(exc)})")
        for name in names:
            try:
                arrays[name] = np.array(f.get_tensor(name), copy=True)
            except Exception as exc:
                _fail(file, name, f"cannot read tensor ({_safetensors_message(exc)})")
    return arrays, metadata


def _safetensors_message(exc: Exception) -> str:
    return f"{type(exc).__name__}: {_short(str(exc), 200).strip(chr(34))}"


# --------------------------------------------------------------------------- write


def _plain(v: Any, file: Path, path: tuple) -> Any:
    """A deep copy with plain JSON types (numpy scalars -> int/float/bool, tuples -> lists, Path -> str)."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, int | np.integer):
        return int(v)
    if isinstance(v, float | np.floating):
        return float(v)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return _plain(v.item(), file, path)
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                _fail(file, _field(path), f"keys must be strings, got {type(k).__name__} {k!r}")
            out[k] = _plain(x, file, path + (k,))
        return out
    if isinstance(v, list | tuple):
        return [_plain(x, file, path + (i,)) for i, x in enumerate(v)]
    _fail(file, _field(path), f"a {type(v).__name__} cannot be stored in {MANIFEST_FILE} "
                              f"(use plain JSON values; arrays belong in the tensors)")


def _prepare_arrays(tensors: Any, file: Path) -> dict[str, np.ndarray]:
    if not isinstance(tensors, dict):
        _fail(file, "", f"tensors must be a dict of name -> numpy array, got {type(tensors).__name__}")
    out = {}
    for name, a in tensors.items():
        if not isinstance(name, str) or not _TENSOR_NAME.fullmatch(name):
            _fail(file, str(name), "invalid tensor name (letters, digits, _ . - /; at most 256 characters; "
                                   "not starting with . - /)")
        if not isinstance(a, np.ndarray):
            _fail(file, name, f"must be a numpy array, got {type(a).__name__}")
        if a.dtype.name not in DTYPES:
            _fail(file, name, f"dtype {a.dtype} cannot be stored in a bundle (use one of {', '.join(DTYPES)})")
        out[name] = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False)
    return out


def _prepare_tensor_entries(m: dict, arrays: dict[str, np.ndarray], tensor_meta: Any, file: Path) -> dict:
    meta = {} if tensor_meta is None else tensor_meta
    if not isinstance(meta, dict):
        _fail(file, "tensors", f"tensor_meta must be a dict of name -> {{format, scale}}, got {type(meta).__name__}")
    for name, tm in meta.items():
        if name not in arrays:
            _fail(file, _field(("tensors", str(name))), "tensor_meta names a tensor that is not being written")
        if not isinstance(tm, dict) or set(tm) - {"format", "scale"}:
            _fail(file, _field(("tensors", name)), f"tensor_meta entries may hold only format and scale, got "
                                                   f"{_short(tm)}")
    previous = m.get("tensors") if isinstance(m.get("tensors"), dict) else {}
    entries = {}
    for name, a in arrays.items():
        prev = previous.get(name) if isinstance(previous.get(name), dict) else {}
        tm = meta.get(name, {})
        entries[name] = {
            "dtype": a.dtype.name,
            "shape": [int(x) for x in a.shape],
            "sha256": tensor_sha256(a),
            "format": tm.get("format", prev.get("format", DEFAULT_FORMATS[a.dtype.name])),
            "scale": tm.get("scale", prev.get("scale")),
        }
    return entries


def write_bundle(path: str | os.PathLike, manifest: dict, tensors: dict[str, np.ndarray],
                 tensor_meta: dict[str, dict] | None = None, overwrite: bool = False) -> Path:
    """Write a bundle folder at ``path`` (atomically) and return ``path``.

    ``manifest`` is everything but ``tensors`` (which is computed: dtype, shape and sha256 from the
    arrays; ``format``/``scale`` from ``tensor_meta[name]``, else from an existing
    ``manifest["tensors"][name]``, else the dtype's integer format and no scale). ``schema``,
    ``schema_version``, ``tool`` and ``created`` are filled in when absent. The caller's dicts are
    not modified. Every check :func:`load_bundle` makes is made first (BundleError naming the
    target file and field); the folder is written next to ``path`` and renamed into place.
    ``path`` may be absent or an empty folder; an existing bundle is replaced only with
    ``overwrite=True``; anything else is never overwritten.
    """
    given = Path(path)
    path = Path(os.path.abspath(given))  # "." and "x/.." have a name to put the temporary folder beside
    if path.parent == path:
        _fail(given, "", "cannot write a bundle at the file-system root")
    mfile, tfile = given / MANIFEST_FILE, given / TENSORS_FILE
    arrays = _prepare_arrays(tensors, tfile)
    m = _plain(manifest, mfile, ())
    if not isinstance(m, dict):
        _fail(mfile, "", f"the manifest must be a dict, got {type(manifest).__name__}")
    m.setdefault("schema", SCHEMA_NAME)
    m.setdefault("schema_version", SCHEMA_VERSION)
    m.setdefault("tool", {"name": "vckattn", "version": __version__})
    m.setdefault("created", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    m["tensors"] = _prepare_tensor_entries(m, arrays, tensor_meta, mfile)
    m = _plain(m, mfile, ())
    _validate_manifest(m, mfile)
    _check_tensor_data(m, arrays, tfile)
    _check_target(given, path, overwrite)

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
        os.mkdir(tmp)  # not tempfile.mkdtemp: its mode 0700 would become the bundle's (umask applies here)
    except OSError as exc:
        _fail(given, "", f"cannot create the bundle folder: {exc.strerror or exc}")
    try:
        _write_files(tmp, m, arrays)
        try:
            load_bundle(tmp)  # the written files, read back exactly as a host would
        except BundleError as exc:
            raise BundleError(exc.file.replace(os.fspath(tmp), os.fspath(given)), exc.field,
                              f"internal error: the written bundle fails its own check: {exc.message}") from None
        _check_target(given, path, overwrite)
        if path.exists():  # an empty folder, or a bundle being overwritten
            trash = path.with_name(f".{path.name}.old-{uuid.uuid4().hex[:8]}")
            os.rename(path, trash)
            try:
                os.rename(tmp, path)
            except BaseException:
                os.rename(trash, path)
                raise
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        _fail(given, "", f"cannot write the bundle: {exc.strerror or exc}")
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return given


def _check_target(given: Path, path: Path, overwrite: bool) -> None:
    """Refuse unless ``path`` is absent, an empty folder, or (with ``overwrite``) a bundle folder."""
    if path.is_symlink():
        _fail(given, "", "is a symbolic link; refusing to replace it")
    if not path.exists():
        return
    if not path.is_dir():
        _fail(given, "", "exists and is not a folder; refusing to overwrite it")
    entries = sorted(p.name for p in path.iterdir())
    if not entries:
        return
    is_bundle = MANIFEST_FILE in entries and set(entries) <= {MANIFEST_FILE, TENSORS_FILE}
    if is_bundle:
        try:
            is_bundle = f'"{SCHEMA_NAME}"'.encode() in (path / MANIFEST_FILE).read_bytes()[:MAX_MANIFEST_BYTES]
        except OSError:
            is_bundle = False
    if not is_bundle:
        shown = ", ".join(entries[:5]) + (", …" if len(entries) > 5 else "")
        _fail(given, "", f"exists and is not a bundle folder (it holds {shown}); refusing to overwrite it")
    if not overwrite:
        _fail(given, "", "a bundle already exists here; pass overwrite=True to replace it")


def _write_files(folder: Path, m: dict, arrays: dict[str, np.ndarray]) -> None:
    """Write manifest.json and tensors.safetensors (sealed) into ``folder``; no checks."""
    from safetensors.numpy import save

    text = json.dumps(m, indent=2, ensure_ascii=True, allow_nan=False) + "\n"
    data = save(arrays, metadata={SEAL_KEY: _manifest_digest(m)})
    for name, payload in ((MANIFEST_FILE, text.encode("utf-8")), (TENSORS_FILE, data)):
        with open(folder / name, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- summary


def describe(bundle: Bundle) -> dict:
    """A JSON-ready summary of a loaded bundle (what ``vckattn inspect`` shows)."""
    m = bundle.manifest
    owner = {name: layer["index"] for layer in m["layers"] for name in layer["tensors"]}
    by_dtype: dict[str, dict[str, int]] = {}
    for a in bundle.tensors.values():
        e = by_dtype.setdefault(a.dtype.name, {"count": 0, "bytes": 0})
        e["count"] += 1
        e["bytes"] += int(a.nbytes)
    layers = []
    for layer in m["layers"]:
        sm, osm, bh = layer["swiftmax"], layer["online_softmax"], layer["bhyt"]
        layers.append({
            "index": layer["index"],
            "normalizer": "swiftmax" if sm is not None else "softmax",
            "beta": None if sm is None else sm["beta"],
            "gamma": None if sm is None else sm["gamma"],
            "p_max": None if sm is None else sm.get("p_max"),
            "per_head": sm is not None and isinstance(sm["beta"], list) and len(set(sm["beta"])) > 1,
            "beta_source": None if sm is None else sm.get("source"),
            "fidelity": layer.get("fidelity"),
            "registers": dict((sm or osm)["registers"]),
            "p_frac": layer["p_frac"],
            "p_scale": 2.0 ** -layer["p_frac"],
            "scales": dict(layer["scales"]),
            "requant_a": dict(layer["requant"]["a"]),
            "bhyt": None if bh is None else {k: bh[k] for k in ("lam_attn", "lam_mlp", "kappa", "c_attn", "seq_len")},
            "sublayer": _describe_sublayer(layer.get("sublayer"), bundle),
            "tensor_count": len(layer["tensors"]),
            "tensor_bytes": int(sum(bundle.tensors[n].nbytes for n in layer["tensors"])),
        })
    return {
        "path": os.fspath(bundle.path),
        "schema_version": m["schema_version"],
        "warnings": list(m.get("warnings", [])),
        "model_fidelity": None if m.get("model_fidelity") is None else dict(m["model_fidelity"]),
        "tool": dict(m["tool"]),
        "created": m["created"],
        "source": dict(m["source"]),
        "model": dict(m["model"]),
        "normalizer": m["normalizer"],
        "norm": m["norm"],
        "calibration": dict(m["calibration"]),
        "formats": json.loads(json.dumps(m["formats"])),
        "layers": layers,
        "tensors": {
            "count": len(bundle.tensors),
            "bytes": int(sum(a.nbytes for a in bundle.tensors.values())),
            "by_dtype": dict(sorted(by_dtype.items())),
            "outside_layers": sorted(n for n in bundle.tensors if n not in owner),
        },
    }


def _describe_sublayer(sub: dict | None, bundle: Bundle) -> dict | None:
    """A layer's sublayer summary: its kind, the residual output's scale, and the encoder's LayerNorm ε or the
    decoder's block-input scale and RoPE table shape."""
    if sub is None:
        return None
    out: dict[str, Any] = {"kind": sub["kind"], "s_out": sub["residual"]["s_out"]}
    if sub["kind"] == "encoder":
        out["ln_eps"] = sub["layernorm"]["eps"]
    else:
        out |= {"s_h": sub["s_h"], "bhyt_eps": sub["bhyt_eps"],
                "rope_shape": list(bundle.tensors[sub["rope"]["cos"]].shape)}
    return out


__all__ = ["SCHEMA_VERSION", "BundleError", "Bundle", "write_bundle", "load_bundle", "describe", "rope_format",
           "sublayer_formats", "sublayer_kind", "tensor_name_of", "tensor_sha256"]
