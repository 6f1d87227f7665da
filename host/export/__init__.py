"""``vckattn export``: a checkpoint -> a deployment bundle of integer attention layers.

The full description: ``docs/internals/host.md``, section ``host/export/__init__.py``.
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
