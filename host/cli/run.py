"""``vckattn run`` and ``vckattn deploy``: a bundle's attention layers on a backend; an xclbin on a card."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vckattn.golden.errors import InputError, UserError
from vckattn.host.export.fidelity import DEFAULT_MIN_FIDELITY, fix_for
from vckattn.host.output import write_json

from .common import EXIT_FIDELITY, Subparsers, check_npz, check_text, device_options, examples, index_list, output_file


def add_run(sub: Subparsers) -> None:
    p = sub.add_parser(
        "run",
        help="run a bundle's attention layers on a backend with real inputs; check bit-exactness and error",
        description="Stream real model inputs through the attention engine on a backend and prove the outputs "
        "right. The host computes the Q/K/V projections (and RoPE) with the bit-exact integer model and runs each "
        "layer in one launch of the engine build named by --manifest (default: the committed best design, "
        "vck5000_engine; vck190_engine for pynq): the command lists, every tile through QK^T -> normalizer -> "
        "P.V -> requantization, every tile's done record checked on return; then W_O. Each layer's output is "
        "compared with the integer golden model (bit_exact: every output accumulator equal) and with the float "
        "golden of the source checkpoint (max abs / max relative error, mean per-token cosine). Backends: emu (the "
        "engine's functional model on the launch's streams), csim (the engine's HLS movers, AIE kernels and HLS "
        "normalizer channels C-simulated with g++), rtl (the engine's generated PL top in Verilator, the AIE "
        "kernels by the functional model; a large design such as vck5000_engine takes minutes to build, "
        "engine_small seconds), xrt (a VCK5000 through pyxrt; needs XRT and a card; unverified on hardware; "
        "VCKATTN_EMULATION=csim runs the same host code on an emulated card), pynq (a VCK190 through PYNQ 4.0; "
        "unverified on hardware). Online-softmax layers need a build with both normalizers (engine_small_dual) "
        "and the emu, csim or rtl backend (or the emulated card). The bundle's source checkpoint must be where it "
        "was at export (or --checkpoint). With a sublayer build (--manifest sublayer_small_encoder or "
        "sublayer_small_decoder) the whole attention sublayer runs on the device instead, X in, Y out: the Q/K/V "
        "and W_O GEMM cascades, the engine, the residual add and, for a BHyT decoder, its site A and RoPE, every PL "
        "unit programmed from the bundle and read back exactly (emu, csim, rtl). Exit status 1 if a layer is not "
        "bit-exact (the device is wrong), 3 if a bit-exact layer's cosine vs the float golden is below "
        "--min-cosine (the bundle's constants do not fit this input).",
        epilog=examples("vckattn export minilm --out B",
                        "vckattn run --bundle B --backend emu --text \"Attention on the Versal array.\"",
                        "vckattn run --bundle B --backend rtl --manifest engine_small --text \"Attention on the "
                        "Versal array.\" --json run.json"),
    )
    p.add_argument("--bundle", type=Path, required=True, metavar="B", help="bundle folder (vckattn export)")
    p.add_argument("--backend", choices=("emu", "rtl", "csim", "xrt", "pynq"), default="emu",
                   help="device backend (default: emu)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", metavar="TEXT", help="input text (goes through the model's tokenizer and embeddings)")
    src.add_argument("--input", type=Path, metavar="X.npz", dest="input_npz",
                     help="npz with layer{i}_input arrays (tokens, hidden) and optional keep (tokens,) - "
                     "the format --save writes")
    p.add_argument("--layers", type=index_list, metavar="I[,I...]", help="0-based layers to run (default: all)")
    p.add_argument("--manifest", metavar="M", help="bitstream manifest file or name in bitstreams/ (default: "
                   "vck5000_engine; vck190_engine for pynq); a sublayer build runs whole sublayers")
    p.add_argument("--checkpoint", type=Path, metavar="PATH",
                   help="the source checkpoint, if it moved since export (float reference)")
    p.add_argument("--min-cosine", type=_cosine, default=None, metavar="C",
                   help="fail (exit status 3) when a layer's mean per-token cosine vs the float golden is below C "
                   "(default: the threshold the bundle's export check held the layer to, recorded in the bundle; "
                   f"{DEFAULT_MIN_FIDELITY} for bundles that record none; -1 accepts any)")
    p.add_argument("--xclbin", type=Path, metavar="F",
                   help="xrt/pynq: the built xclbin (not for xrt on an emulated card: VCKATTN_EMULATION=csim)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="xrt: card index (default 0)")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="rtl: cocotb random seed")
    p.add_argument("--aie-path", choices=("scalar", "vector"), default="scalar", dest="aie_path",
                   help="csim: run the AIE kernels' scalar path (default) or their vector path over the AIE API "
                   "emulation")
    p.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the report as JSON")
    p.add_argument("--save", type=Path, metavar="OUT.npz",
                   help="save per layer layer{i}_input / layer{i}_output (tokens, hidden), dequantized float")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--truncate", action="store_true", help="cut a --text longer than the model's positions to them")
    p.set_defaults(func=run_run)


def run_run(args: argparse.Namespace) -> int:
    from vckattn.host import run

    check_device_flags(args)
    opts = device_options(args)
    output_file(args.json_out, what="--json")
    output_file(args.save, what="--save")
    if args.text is not None:
        check_text(args.text)
    if args.input_npz is not None:
        check_npz(args.input_npz, [f"layer{i}_input" for i in args.layers] if args.layers else None)
    report = run.run(args.bundle, args.backend, text=args.text, input_npz=args.input_npz, layers=args.layers,
                     manifest_path=args.manifest, checkpoint=args.checkpoint, save=args.save, device_options=opts,
                     progress=not args.quiet, truncate=args.truncate)
    run.print_report(report)
    if args.json_out is not None:
        write_json(args.json_out, report)
    if args.save is not None:
        print(f"saved {args.save}")
    if not all(r["bit_exact"] for r in report["layers"]):
        return 1
    low = [r for r in report["layers"] if r["cosine"] < _threshold(r, args.min_cosine)]
    if low:
        r = min(low, key=lambda x: x["cosine"] - _threshold(x, args.min_cosine))
        others = f" (and {len(low) - 1} more)" if len(low) > 1 else ""
        t = _threshold(r, args.min_cosine)
        what = "--min-cosine" if args.min_cosine is not None else "the export check's threshold"
        cal = report.get("calibration") or {}
        fix = fix_for(r["normalizer"], _tuned(r), method=cal.get("method"), percentile=cal.get("percentile"))
        print(f"vckattn: error: layer {r['layer']}{others}: cosine {r['cosine']:.4f} vs the float golden is below "
              f"{what} {t:g}: the bundle's constants do not fit this input ({fix}); --min-cosine -1 accepts it",
              file=sys.stderr)
        return FIDELITY_EXIT
    return 0


def _threshold(row: dict, given: float | None) -> float:
    """A layer's --min-cosine: the one given, else the threshold its export check held it to (the bundle records
    it), else :data:`DEFAULT_MIN_FIDELITY`."""
    if given is not None:
        return given
    return float(row.get("threshold") if row.get("threshold") is not None else DEFAULT_MIN_FIDELITY)


def _tuned(row: dict) -> bool | None:
    """Whether the layer's SwiftMax β/γ came from the checkpoint (tuned); None when the bundle does not say."""
    src = row.get("beta_source")
    return None if src is None else src == "checkpoint"


#: exit status of ``run`` when a bit-exact layer falls below ``--min-cosine``
FIDELITY_EXIT = EXIT_FIDELITY


def check_device_flags(args: argparse.Namespace) -> None:
    """``--device`` (a card index, >= 0) and ``--xclbin`` (an existing file) of run/eval/deploy, before any work."""
    if getattr(args, "device", 0) < 0:
        raise UserError(f"--device is a card index (0, 1, ...), got {args.device}")
    xclbin = getattr(args, "xclbin", None)
    if xclbin is not None and (getattr(args, "backend", "xrt") in ("xrt", "pynq")):
        if not xclbin.exists():
            raise InputError(f"--xclbin {xclbin} does not exist (build it with `make xclbin DESIGN=...`)")
        if not xclbin.is_file():
            raise InputError(f"--xclbin {xclbin} is not a file")


def _cosine(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not -1.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"a cosine is in -1..1, got {v:g}")
    return v


def add_deploy(sub: Subparsers) -> None:
    p = sub.add_parser(
        "deploy",
        help="check an xclbin against a bundle and load its constants on a VCK5000 (needs XRT and a card)",
        description="Open a VCK5000 through XRT (pyxrt), load the xclbin, check its UUID and kernel names against "
        "the bitstream manifest (given, or the one in bitstreams/ recording that UUID), check the bundle against "
        "the build (head size, normalizers, fixed-point formats), open every mover compute unit, the PL top and "
        "the AIE graph, read the PL top's ID register, write layer 0's runtime constants (for the build's narrow "
        "scores, as `run` makes them) and read them back. "
        "Nothing runs on the card: `vckattn board selftest` runs a known layer, `vckattn run --backend xrt` the "
        "bundle. Deploy means a real card: with VCKATTN_EMULATION set it is refused (check an engine build on the "
        "emulated card with `VCKATTN_EMULATION=csim vckattn board selftest --manifest engine_small`). Without XRT "
        "(status 6) or without a card (status 7) it says what is missing. Unverified on hardware: tested against a "
        "recording fake of pyxrt and a stub of the XRT library only.",
        epilog=examples("vckattn deploy --xclbin build/vitis/vck5000_engine/hw/vck5000_engine.xclbin "
                        "--bundle build/bundles/minilm --manifest build/vitis/vck5000_engine.json --json deploy.json",
                        "vckattn deploy --xclbin build/vitis/vck5000_engine/hw/vck5000_engine.xclbin "
                        "--bundle build/bundles/minilm"),
    )
    p.add_argument("--xclbin", type=Path, required=True, metavar="F", help="the built xclbin")
    p.add_argument("--bundle", type=Path, required=True, metavar="B", help="bundle folder (vckattn export)")
    p.add_argument("--manifest", type=Path, metavar="M", help="bitstream manifest (default: found by UUID)")
    p.add_argument("--device", type=int, default=0, metavar="N", help="card index (default 0)")
    p.add_argument("--json", type=Path, metavar="OUT", dest="json_out", help="write the report as JSON")
    p.set_defaults(func=run_deploy)


def run_deploy(args: argparse.Namespace) -> int:
    from vckattn.host.bundle import load_bundle
    from vckattn.host.deploy import deploy

    check_device_flags(args)
    output_file(args.json_out, what="--json")
    load_bundle(args.bundle)  # a bad bundle is refused before the card is touched
    if args.manifest is not None:
        from vckattn.hw.design.manifest import load_manifest

        load_manifest(args.manifest)
    report = deploy(args.xclbin, args.bundle, manifest=args.manifest, device_index=args.device)
    write_json("-", report)
    if args.json_out is not None:
        write_json(args.json_out, report)
    return 0
