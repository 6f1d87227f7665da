"""``vckattn bench emulator|host``: benchmarks measured side by side in one run."""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import Subparsers, examples, missing_subcommand, output_file, positive_int


def add_bench(sub: Subparsers) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmarks measured side by side in one run (ratios, JSON)",
        description="Benchmarks. `emulator`: the bit-exact integer emulation of one attention layer "
        "(int8 projections, QKᵀ, SwiftMax or online-softmax kernel, P·V, W_O) against torch fp32 "
        "attention of the same size (nn.Linear + scaled_dot_product_attention), run alternately on this "
        "machine; prints medians and the speed ratio (torch time / emulator time). `host`: the host stack's "
        "overhead per tile on the emu backend (projections, tiling, tile-id checks, thread hand-off, W_O) against "
        "the emulator's own per-tile compute, alternated with the monolithic emulator in one run.",
        epilog=examples("vckattn bench emulator --seq 128 --repeats 5", "vckattn bench host --seq 128 --repeats 3"),
    )
    bsub = p.add_subparsers(title="benchmarks", dest="bench", metavar="BENCHMARK", parser_class=type(p))
    e = bsub.add_parser(
        "emulator", help="integer emulator vs torch fp32 attention (default: BERT-base layer)",
        description="Time the bit-exact integer emulation of one attention layer (int8 projections, QKᵀ, SwiftMax "
        "or online-softmax kernel, P·V, W_O) against torch fp32 attention of the same size, run alternately on "
        "this machine; prints the medians and the speed ratio (torch time / emulator time).",
        epilog=examples("vckattn bench emulator --seq 128 --repeats 5",
                        "vckattn bench emulator --json results/bench_emulator.json"),
    )
    e.add_argument("--seq", type=positive_int, default=512, help="sequence length (default: %(default)s)")
    e.add_argument("--heads", type=positive_int, default=12, help="heads (default: %(default)s)")
    e.add_argument("--d-head", type=positive_int, default=64, help="head dimension (default: %(default)s)")
    e.add_argument("--repeats", type=positive_int, default=15, help="runs of each (default: %(default)s)")
    e.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    e.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    e.set_defaults(func=run_bench_emulator)
    h = bsub.add_parser(
        "host", help="host time per launch of an engine build vs the MODELED device time of the launch",
        description="Measure the host's own work for one launch per layer of an engine build (the cached command "
        "lists, the key-mask check, the done-log check, the A buffer as head outputs; also after the operand copy, "
        "with new padding, for a new shape) against the MODELED device time of that launch; medians of --repeats "
        "(at least 21). The card is not run: the done buffer is the one a correct launch leaves.",
        epilog=examples("vckattn bench host --seq 128 --repeats 21",
                        "vckattn bench host --manifest vck5000_engine --json results/bench_host.json"),
    )
    h.add_argument("--manifest", metavar="NAME", default=None, help="engine build: a name in bitstreams/ or a .json "
                   "file (default: the committed best design, vck5000_engine)")
    h.add_argument("--seq", type=positive_int, default=512, help="sequence length (default: %(default)s)")
    h.add_argument("--heads", type=positive_int, default=12, help="heads (default: %(default)s)")
    h.add_argument("--d-head", type=int, choices=(32, 64), default=64, help="head dimension (default: %(default)s)")
    h.add_argument("--batch", type=positive_int, default=8, help="sequences per launch (default: %(default)s)")
    h.add_argument("--repeats", type=positive_int, default=21, help="launches timed per case, at least 21 "
                   "(default: %(default)s)")
    h.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    h.add_argument("--json", metavar="OUT", dest="json_out", type=Path, help="also write the report as JSON")
    h.set_defaults(func=run_bench_host)
    p.set_defaults(func=lambda args: missing_subcommand(p))


def run_bench_host(args: argparse.Namespace) -> int:
    from vckattn.host import bench
    from vckattn.host.cli.common import UserError
    from vckattn.hw.design.manifest import default_manifest, load_manifest

    output_file(args.json_out, what="--json")
    manifest = load_manifest(args.manifest or default_manifest())
    if not manifest.data.get("engine"):
        raise UserError(f"{manifest.name}: bench host measures an engine build's launches (no engine section)")
    bench.run_host(args.json_out, manifest_name=str(manifest.file), seq=args.seq, heads=args.heads,
                   d_head=args.d_head, batch=args.batch, repeats=max(args.repeats, 21), seed=args.seed)
    return 0


def run_bench_emulator(args: argparse.Namespace) -> int:
    from vckattn.host import bench

    output_file(args.json_out, what="--json")
    bench.run(args.json_out, seq=args.seq, heads=args.heads, d_head=args.d_head, repeats=args.repeats,
              seed=args.seed)
    return 0
