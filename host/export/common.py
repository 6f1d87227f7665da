"""What every export step shares: the error type, the defaults and small helpers."""

from __future__ import annotations

from vckattn.golden.errors import EXIT_FIDELITY, EXIT_INPUT, InputError
from vckattn.host.checkpoints import FAMILIES, first_line

DEFAULT_SEQ_LEN = 128
DEFAULT_CALIB_SENTENCES = 32
DEFAULT_BATCH = 32
DEFAULT_MAX_SENTENCES = 512
DEFAULT_PERCENTILE = 99.99
#: T of BHyT's c_attn when config.json has no ``vckattn_bhyt.seq_len``
DEFAULT_BHYT_SEQ_LEN = 1024
#: at most this many values per tensor and batch enter a percentile (seeded subsample beyond)
PERCENTILE_SAMPLE = 1 << 21
INT8_MAX = 127
#: the SwiftMax β/γ initialisation of layers whose checkpoint has none (per head; README "Export")
DEFAULT_SWIFTMAX_INIT = "max"


class ExportError(InputError):
    """A problem with the export's inputs (one line for the CLI; an InputError, as every unusable checkpoint)."""

    exit_code = EXIT_INPUT


class LowFidelityError(ExportError):
    """The export check found a layer or head whose integer output does not follow its float layer
    (``vckattn export`` exits with the fidelity status)."""

    exit_code = EXIT_FIDELITY


__all__ = ["DEFAULT_BATCH", "DEFAULT_BHYT_SEQ_LEN", "DEFAULT_CALIB_SENTENCES", "DEFAULT_MAX_SENTENCES",
           "DEFAULT_PERCENTILE", "DEFAULT_SEQ_LEN", "DEFAULT_SWIFTMAX_INIT", "FAMILIES", "INT8_MAX",
           "PERCENTILE_SAMPLE", "ExportError", "LowFidelityError", "first_line"]
