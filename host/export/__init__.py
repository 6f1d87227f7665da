"""``vckattn export``: a checkpoint -> a deployment bundle of integer attention layers.

The exporter loads a float model, runs it on calibration text, and builds for every layer the integer
attention layer of the golden emulator (:mod:`vckattn.golden.quant_attention`): int8 weights with
per-channel scales, int32 biases, per-tensor activation scales, the requantization registers and the
normalizer registers (SwiftMax or the online-softmax baseline), plus the BHyT site registers of BHyT
models. Every register value comes from the golden constant functions (``QuantLinear.from_float``,
``requant_registers``, ``swiftmax_registers``, ``choose_out_frac``, ``online_softmax_registers``,
``bhyt_site_registers``); the exporter only chooses the float scales they are given.

The pipeline (:func:`export_checkpoint`), one module per step, each usable on its own:

1. :mod:`.sources` — load a checkpoint from any source (HF folder, bare safetensors, GGUF, golden ``.pt``
   of :mod:`.golden_checkpoint`): :func:`resolve_checkpoint`, :func:`load_model`;
2. :mod:`.capture` — activation capture on the calibration data: :func:`capture_activations`;
3. :mod:`.quantize` — int8 scales and P format per layer (``minmax`` / ``percentile``), the integer layer:
   :func:`activation_scales`, :func:`build_layer` (on the float reference of :mod:`.reference`,
   :func:`float_layer`, which ``vckattn run`` also uses);
4. :mod:`.constants` — SwiftMax β/γ (checkpoint, or :func:`vckattn.golden.calibrate.init_beta_gamma`) and
   BHyT site constants: :func:`swiftmax_beta_gamma`, :func:`bhyt_registers`;
5. :mod:`.sublayer` — the rest of each layer's sublayer (golden/sublayer.py): the residual add's registers, the
   encoder's LayerNorm, the decoder's block-input scale and RoPE tables; :func:`to_sublayer` rebuilds golden's
   :class:`EncoderSublayer` / :class:`DecoderSublayer` from a loaded bundle, :func:`sublayer_rope` its RoPE tables;
6. :mod:`.writer` — the manifest, tensors and bundle (:func:`vckattn.host.bundle.write_bundle`), and
   :func:`to_quant_layer` to rebuild golden's :class:`QuantAttentionLayer` from a loaded bundle.

:mod:`.pipeline` chains them (:func:`calibrate_layer` for one layer) and runs two checks before anything is
written: per layer (:mod:`.fidelity`: the integer layer against its float layer) and for the whole model
(:mod:`.model_check`: every exported layer integer, against the softmax model on held-out inputs); it also refuses
a shape no hardware build runs (:func:`check_runs`).
"""

from __future__ import annotations

from .capture import Batch, Captured, calibration_batches, capture_activations
from .common import (
    DEFAULT_BATCH,
    DEFAULT_BHYT_SEQ_LEN,
    DEFAULT_CALIB_SENTENCES,
    DEFAULT_MAX_SENTENCES,
    DEFAULT_PERCENTILE,
    DEFAULT_SEQ_LEN,
    FAMILIES,
    ExportError,
    LowFidelityError,
    first_line,
)
from .constants import SWIFTMAX_INITS, bhyt_registers, bhyt_scales, calibration_rows, swiftmax_beta_gamma
from .golden_checkpoint import (
    GOLDEN_KEY,
    GOLDEN_VERSION,
    GoldenStack,
    build_golden_stack,
    check_golden_config,
    save_golden_checkpoint,
)
from .pipeline import bundle_contents, calibrate_layer, check_layers, check_runs, export_checkpoint
from .quantize import PRange, Range, activation_scales, build_layer
from .reference import float_layer, keep4, layer_output
from .sources import (
    LoadedLayer,
    LoadedModel,
    Source,
    check_model_type,
    hf_weight_files,
    load_model,
    quiet_transformers,
    read_config_json,
    resolve_checkpoint,
    swiftmax_from_state,
    vckattn_tensors,
)
from .sublayer import ROPE_TENSORS, rope_contents, rope_float_tables, sublayer_contents, sublayer_rope, to_sublayer
from .writer import ExportedLayer, build_manifest, layer_contents, tensor_name, text_sha256, to_quant_layer, write

__all__ = [
    "DEFAULT_BATCH", "DEFAULT_BHYT_SEQ_LEN", "DEFAULT_CALIB_SENTENCES", "DEFAULT_MAX_SENTENCES",
    "DEFAULT_PERCENTILE", "DEFAULT_SEQ_LEN", "FAMILIES", "GOLDEN_KEY", "GOLDEN_VERSION", "ROPE_TENSORS",
    "SWIFTMAX_INITS",
    "Batch", "Captured", "ExportError", "ExportedLayer", "GoldenStack", "LowFidelityError", "LoadedLayer",
    "LoadedModel", "PRange",
    "Range", "Source", "activation_scales", "bhyt_registers", "bhyt_scales", "build_golden_stack", "build_layer",
    "build_manifest", "bundle_contents", "calibrate_layer", "calibration_batches", "calibration_rows",
    "capture_activations", "check_golden_config", "check_layers", "check_model_type", "check_runs",
    "export_checkpoint",
    "first_line", "float_layer", "hf_weight_files", "keep4", "layer_contents", "layer_output", "load_model",
    "quiet_transformers", "read_config_json", "resolve_checkpoint", "rope_contents", "rope_float_tables",
    "save_golden_checkpoint", "sublayer_contents", "sublayer_rope", "swiftmax_beta_gamma", "swiftmax_from_state",
    "tensor_name", "text_sha256", "to_quant_layer", "to_sublayer",
    "vckattn_tensors", "write",
]
