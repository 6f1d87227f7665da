"""Error types and exit statuses shared by every layer (a leaf module: it imports nothing).

:class:`UserError` is a problem the user can fix (a bad file, a wrong flag, a bundle that does not
match a build). The CLI reports it as one line on stderr, with the exit status of its kind
(:data:`EXIT_CODES`); every layer may raise it (the hardware manifest, the Vitis flow, the host), so it
lives here, below all of them. A subclass names its kind by its ``exit_code``.
"""

from __future__ import annotations

#: the CLI's exit statuses (README "Exit statuses"); every command uses these and no others
EXIT_OK = 0
EXIT_NOT_BIT_EXACT = 1
EXIT_USAGE = 2
EXIT_FIDELITY = 3
EXIT_INPUT = 4
EXIT_BUNDLE = 5
EXIT_TOOL = 6
EXIT_DEVICE = 7
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

EXIT_CODES: dict[int, str] = {
    EXIT_OK: "success",
    EXIT_NOT_BIT_EXACT: "a result is not bit-exact (run, verification): the hardware path disagrees with the golden "
                        "model",
    EXIT_USAGE: "usage: a bad command-line argument, option or combination (an option a model or backend does not "
                "take: --text for a ViT, a backend without the bundle's normalizer)",
    EXIT_FIDELITY: "fidelity below the threshold: a layer's integer attention does not follow its float model, or "
                   "the whole model with its integer attention does not keep the softmax model (the export checks, "
                   "run --min-cosine)",
    EXIT_INPUT: "bad input file or value: missing, a folder, unreadable, wrong encoding, dtype, shape or size; a "
                "checkpoint with NaN/Inf weights, without a usable tokenizer, not the bundle's source, or of a "
                "shape no hardware build runs; an output path or build folder that cannot be written",
    EXIT_BUNDLE: "bad bundle or bitstream manifest: corrupt, truncated, or not matching this build or this "
                 "vckattn",
    EXIT_TOOL: "a tool or package this command needs is missing (Verilator, g++, AMD XRT, an optional extra)",
    EXIT_DEVICE: "hardware or backend failure: a simulation that failed, a device timeout, a card that answered "
                 "wrongly",
    EXIT_INTERNAL: "internal error (a bug): the full trace is written to a file the message names",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}

__all__ = ["EXIT_BUNDLE", "EXIT_CODES", "EXIT_DEVICE", "EXIT_FIDELITY", "EXIT_INPUT", "EXIT_INTERNAL",
           "EXIT_INTERRUPTED", "EXIT_NOT_BIT_EXACT", "EXIT_OK", "EXIT_TOOL", "EXIT_USAGE", "InputError",
           "ToolMissing", "UserError"]


class UserError(Exception):
    """A problem the user can fix; reported as one line on stderr with status ``exit_code`` (usage: 2)."""

    exit_code = EXIT_USAGE


class InputError(UserError):
    """An input file or value (text, npz, checkpoint, calibration file) or an output path is unusable."""

    exit_code = EXIT_INPUT


class ToolMissing(UserError):
    """A tool or package the command needs is not installed (the message says which and how to get it)."""

    exit_code = EXIT_TOOL
