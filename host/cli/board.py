"""``vckattn board selftest``: four checks that a card runs an engine build right (:mod:`vckattn.host.selftest`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vckattn.golden.errors import UserError

from .common import Subparsers, examples, missing_subcommand


def add_board(sub: Subparsers) -> None:
    p = sub.add_parser(
        "board",
        help="check a card: load the xclbin, program and read back registers, run a known layer bit-exact, time it",
        description="Commands for a card that runs an engine build. `selftest`: load the xclbin and check its UUID, "
        "program the PL top's registers and read them back, run a known layer and compare it bit for bit with the "
        "golden model, and report the measured time beside the model's prediction.",
        epilog=examples("VCKATTN_EMULATION=csim vckattn board selftest --manifest engine_small"),
    )
    bsub = p.add_subparsers(title="board", dest="board", metavar="ACTION", parser_class=type(p))
    s = bsub.add_parser(
        "selftest",
        help="four checks of an engine build on a card (or the emulated card): xclbin, registers, tiles, timing",
        description="Four checks of an engine build on a card, one line each, PASS or FAIL. "
        "xclbin: open the card, load the xclbin and check that its UUID is the one the manifest records "
        "(with VCKATTN_EMULATION=csim the xrt backend opens the emulated card, whose design is the manifest's: no "
        "xclbin is read). registers: program the PL top's SwiftMax registers for a known layer and read every one "
        "back, exactly. tiles: run the known layer (2 sequences of 45 tokens, the second padded after 30, 4 heads "
        "of the build's smallest head size, seeded) twice and compare its outputs bit for bit with the integer "
        "golden model. timing: the second run's launch time, measured on this device (under emulation: the "
        "emulator's time on this machine, not a board time), beside the performance model's prediction for the "
        "same workload and design (modeled). Exit status 0 when every check passes, else the first failed "
        "check's: 6 a missing runtime (XRT, PYNQ; g++ for the emulated card), 7 a device fault (no card, wrong "
        "UUID, register read-back mismatch, time-out), 1 a result that is not bit-exact.",
        epilog=examples("VCKATTN_EMULATION=csim vckattn board selftest --manifest engine_small",
                        "vckattn board selftest --manifest build/vitis/vck5000_engine.json "
                        "--xclbin build/vitis/vck5000_engine/hw/vck5000_engine.xclbin --json selftest.json",
                        note="On a card, --manifest is the manifest `make xclbin` wrote beside the xclbin (it "
                        "records the xclbin's UUID)."),
    )
    s.add_argument("--manifest", required=True, metavar="M",
                   help="an engine build's manifest: a file, or a name in bitstreams/ (engine_small, vck5000_engine)")
    s.add_argument("--xclbin", type=Path, metavar="F",
                   help="the built xclbin (needed on a card; not read on the emulated card)")
    s.add_argument("--backend", choices=("xrt", "pynq"), default=None,
                   help="xrt (a VCK5000, or the emulated card) or pynq (a VCK190 through PYNQ); default: pynq for a "
                        "VCK190 build, else xrt")
    s.add_argument("--device", type=int, default=0, metavar="N", help="xrt: card index (default 0)")
    s.add_argument("--timeout-ms", type=_timeout, default=None, metavar="MS", dest="timeout_ms",
                   help="time-out of each wait on the card (default: the manifest's timeout_ms)")
    s.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="also write the report (every check) "
                   "as JSON")
    s.set_defaults(func=run_selftest)
    p.set_defaults(func=lambda args: missing_subcommand(p))


def _timeout(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 ms: {text!r}")
    return v


def run_selftest(args: argparse.Namespace) -> int:

    from vckattn.host import selftest
    from vckattn.host.backends.emulation import emulation_mode
    from vckattn.host.output import write_json
    from vckattn.hw.design.manifest import load_manifest

    from .common import output_file
    from .run import check_device_flags

    manifest = load_manifest(args.manifest)  # a bad manifest: status 5, before the card is touched
    backend = args.backend or ("pynq" if manifest.data.get("board") == "vck190" else "xrt")
    args.backend = backend
    check_device_flags(args)
    output_file(args.json_out, what="--json")
    if args.xclbin is None and not (backend == "xrt" and emulation_mode() is not None):
        raise UserError(f"board selftest --backend {backend} needs --xclbin (the built xclbin; or set "
                        "VCKATTN_EMULATION=csim to run the xrt backend on the emulated card)")
    opts = {"timeout_ms": args.timeout_ms} if args.timeout_ms is not None else {}
    report = selftest.selftest(manifest, backend, xclbin=args.xclbin, device_index=args.device, device_options=opts)
    selftest.print_report(report)
    if args.json_out is not None:
        write_json(args.json_out, report)
        print(f"wrote {args.json_out}")
    if not report["passed"]:
        first = next(c for c in report["checks"] if c["status"] == "FAIL")
        print(f"vckattn: error: board selftest failed: check {first['name']}: {first['detail']}", file=sys.stderr)
    return int(report["exit_code"])
