"""`vckattn profile`: precision profiling against the hardware formats (tiny BERT + the real MiniLM)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import require_module

require_module("transformers")

from vckattn.golden import calibrate  # noqa: E402
from vckattn.golden.online_softmax_int import OnlineSoftmaxFormat  # noqa: E402
from vckattn.golden.pretrained import minilm_dir  # noqa: E402
from vckattn.golden.requant import quantize_symmetric, symmetric_scale  # noqa: E402
from vckattn.golden.swiftmax_int import CLAMP_HI, CLAMP_LO, SwiftMaxFormat, choose_out_frac  # noqa: E402
from vckattn.host import cli, profile  # noqa: E402
from vckattn.host.textdata import real_sentences  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
QUANTITIES = {"scores", "z_max", "sum_exp", "activations", "q", "k", "v", "tanh_arg"}
STAT_KEYS = {"n", "sampled", "min", "p0.1", "p1", "p50", "p99", "p99.9", "max", "abs_max", "mean", "std"}


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory) -> Path:
    """A 2-layer BERT (hidden 32, 4 heads) with the MiniLM tokenizer; q/k weights scaled up so
    that attention is peaked and the score distribution is wide."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    path = tmp_path_factory.mktemp("tiny_bert")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=128)
    model = BertModel(cfg)
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.weight.mul_(15.0)
            layer.attention.self.key.weight.mul_(15.0)
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(minilm_dir()).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return real_sentences(12, start_topic=20)


@pytest.fixture(scope="module")
def data_file(tmp_path_factory, sentences) -> Path:
    path = tmp_path_factory.mktemp("data") / "sentences.txt"
    lines = []
    for s in sentences:
        lines += [s, "", "   "]  # blank lines are skipped
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cli_run(tiny_ckpt, data_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("prof")
    rc, stdout, stderr = _run(["profile", str(tiny_ckpt), "--data", str(data_file), "--out", str(out / "o"),
                               "--json", str(out / "copy.json"), "--seed", "3"])
    return rc, stdout, stderr, out


def _independent(ckpt: Path, sentences: list[str]) -> list[dict[str, np.ndarray]]:
    """Scores, row stats, q/k/v and layer inputs of valid tokens, straight from Hugging Face's own
    eager model with hooks on the q/k/v Linear layers (no vckattn code involved)."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(ckpt)
    model = AutoModel.from_pretrained(ckpt, dtype=torch.float32, attn_implementation="eager").eval()
    layers = model.encoder.layer
    cap: dict[tuple[int, str], list[torch.Tensor]] = {}
    hooks = []
    for i, layer in enumerate(layers):
        sa = layer.attention.self
        for name in ("query", "key", "value"):
            hooks.append(getattr(sa, name).register_forward_hook(
                lambda _m, _a, o, i=i, name=name: cap.setdefault((i, name), []).append(o.detach())))
        hooks.append(layer.register_forward_pre_hook(
            lambda _m, a, i=i: cap.setdefault((i, "x"), []).append(a[0].detach())))
    enc = tok(sentences, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        model(**enc)
    for h in hooks:
        h.remove()
    valid = enc["attention_mask"].bool()
    heads = model.config.num_attention_heads
    out = []
    for i in range(len(layers)):
        q, k = (cap[(i, n)][0].double() for n in ("query", "key"))
        b, s, d = q.shape
        qh = q.view(b, s, heads, -1).transpose(1, 2)
        kh = k.view(b, s, heads, -1).transpose(1, 2)
        z = qh @ kh.transpose(-1, -2) / math.sqrt(d // heads)
        entries = (valid[:, None, :, None] & valid[:, None, None, :]).expand(b, heads, s, s)
        zm = z.masked_fill(~entries, -math.inf)
        m = zm.amax(-1)
        rows = valid[:, None, :].expand(b, heads, s)
        e = torch.exp(zm - torch.where(rows, m, torch.zeros_like(m))[..., None])
        ssum = e.sum(-1)
        p_soft = (e / torch.where(rows, ssum, torch.ones_like(ssum))[..., None])[entries]
        out.append({"z": z[entries].numpy(), "z_max": m[rows].numpy(), "sum_exp": ssum[rows].numpy(),
                    "p_soft": p_soft.numpy(), "longest": int(valid.sum(1).max()),
                    **{n: cap[(i, name)][0][valid].double().numpy()
                       for n, name in (("q", "query"), ("k", "key"), ("v", "value"), ("x", "x"))}})
    return out


# --------------------------------------------------------------------------- tiny BERT through the CLI


def test_cli_writes_json_and_pngs(cli_run, sentences):
    rc, stdout, stderr, out = cli_run
    assert rc == 0, stderr
    report = json.loads((out / "o" / "profile.json").read_text(encoding="utf-8"))
    assert json.loads((out / "copy.json").read_text(encoding="utf-8")) == report
    assert set(report) >= {"model", "data", "formats", "layers", "flags", "plots"}
    assert report["model"]["model_type"] == "bert" and report["model"]["layers"] == 2
    assert report["data"]["sentences"] == len(sentences)  # blank lines skipped
    assert report["formats"]["swiftmax"]["acc_bits"] == SwiftMaxFormat().acc_bits
    assert report["formats"]["online_softmax"]["sum_bits"] == OnlineSoftmaxFormat().sum_bits
    assert len(report["layers"]) == 2
    for i, e in enumerate(report["layers"]):
        assert e["layer"] == i
        assert set(e["quantities"]) == QUANTITIES
        for q in QUANTITIES:
            stats = e["quantities"][q]
            assert set(stats) == STAT_KEYS, q
            ordered = [stats[k] for k in ("min", "p0.1", "p1", "p50", "p99", "p99.9", "max")]
            assert ordered == sorted(ordered), q
        for q in ("activations", "q", "k", "v"):
            assert e["int8"][q]["scale"] == pytest.approx(e["quantities"][q]["abs_max"] / 127)
            assert 0.0 <= e["int8"][q]["zero_frac"] <= 1.0
        sw = e["swiftmax"]
        assert sw["beta"] == pytest.approx(e["quantities"]["z_max"]["mean"])
        assert sw["gamma"] == pytest.approx(e["quantities"]["sum_exp"]["mean"])
        assert sw["saturation_level"] == 255 * 2.0 ** -sw["out_frac"]
        assert sw["saturate_frac"] <= 1e-4 + 1e-12  # the 99.99th percentile fits by construction
        assert sw["registers"] is not None
        assert e["accumulator"]["acc_bits"] == 24 and e["online_softmax"]["max_keys"] == 2**14
        assert e["tanh"]["range"] == 8.0
        assert all(f.startswith(f"layer {i}: ") for f in e["flags"])
    assert report["flags"] == [f for e in report["layers"] for f in e["flags"]]
    pngs = sorted((out / "o").glob("*.png"))
    assert 1 <= len(pngs) <= 6 and sorted(map(Path, report["plots"])) == pngs
    import matplotlib.image

    for p in pngs:
        assert p.read_bytes()[:8] == PNG_MAGIC, p
        assert matplotlib.image.imread(p).ndim == 3
    assert "precision profile" in stdout and "profile.json" in stdout and "flag" in stdout
    assert "Traceback" not in stderr


def test_numbers_match_an_independent_computation(cli_run, tiny_ckpt, sentences):
    """β, γ, the P format, saturation/underflow, int8 zero fractions, the softmax baseline and
    the tanh arguments, recomputed from Hugging Face's eager attention."""
    report = json.loads((cli_run[3] / "o" / "profile.json").read_text(encoding="utf-8"))
    ref = _independent(tiny_ckpt, sentences)
    fmt, ofmt = SwiftMaxFormat(), OnlineSoftmaxFormat()
    for e, r in zip(report["layers"], ref, strict=True):
        sw = e["swiftmax"]
        assert e["quantities"]["scores"]["n"] == r["z"].size
        assert e["quantities"]["z_max"]["n"] == r["z_max"].size == sw["rows"]
        assert sw["beta"] == pytest.approx(r["z_max"].mean(), rel=1e-5, abs=1e-6)
        assert sw["gamma"] == pytest.approx(r["sum_exp"].mean(), rel=1e-5)
        assert e["quantities"]["scores"]["p99"] == pytest.approx(np.percentile(r["z"], 99), rel=1e-4, abs=1e-5)
        p = np.exp(np.clip(r["z"] - sw["beta"], CLAMP_LO, CLAMP_HI)) / sw["gamma"]
        of = choose_out_frac(float(np.percentile(p, 99.99)), fmt)
        assert sw["out_frac"] == of
        tol = 2 / p.size
        assert sw["saturate_frac"] == pytest.approx(np.mean(p > fmt.out_max * 2.0**-of), abs=tol)
        assert sw["underflow_frac"] == pytest.approx(np.mean(p < 0.5 * 2.0**-of), abs=tol)
        onl = e["online_softmax"]
        assert onl["longest_row"] == r["longest"]
        lsb = 2.0**-ofmt.out_frac
        assert onl["saturate_frac"] == pytest.approx(np.mean(r["p_soft"] > ofmt.out_max * lsb), abs=tol)
        assert onl["underflow_frac"] == pytest.approx(np.mean(r["p_soft"] < 0.5 * lsb), abs=tol)
        for q in ("q", "k", "v"):
            s = float(symmetric_scale(r[q]))
            assert e["int8"][q]["scale"] == pytest.approx(s, rel=1e-6)
            assert e["int8"][q]["zero_frac"] == pytest.approx(np.mean(quantize_symmetric(r[q], s) == 0),
                                                             abs=2 / r[q].size)
        x = r["x"]
        arg = 2.0 * x / (10.0 * np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6))
        assert e["tanh"]["max_abs_arg"] == pytest.approx(np.abs(arg).max(), rel=1e-5)
        assert e["quantities"]["tanh_arg"]["p50"] == pytest.approx(np.percentile(arg, 50), abs=1e-5)
        assert e["tanh"]["max_abs_arg"] <= e["tanh"]["bound"] + 1e-6  # |arg| <= λ√d/κ always


def test_saturation_flag_reacts_to_a_too_fine_output_format(tiny_ckpt, sentences, tmp_path):
    """Force P's out_frac so that the median P saturates: the flag appears and the fraction equals
    the one recomputed from the reference scores."""
    ref = _independent(tiny_ckpt, sentences)
    base = profile.run_profile(tiny_ckpt, sentences, tmp_path / "a", plots=False)
    forced = []
    for e, r in zip(base["layers"], ref, strict=True):
        p = np.exp(np.clip(r["z"] - e["swiftmax"]["beta"], CLAMP_LO, CLAMP_HI)) / e["swiftmax"]["gamma"]
        forced.append(choose_out_frac(float(np.median(p))) + 1)
    report = profile.run_profile(tiny_ckpt, sentences, tmp_path / "b", plots=False, out_frac=forced)
    assert not list((tmp_path / "b").glob("*.png"))
    for e, r, of in zip(report["layers"], ref, forced, strict=True):
        sw = e["swiftmax"]
        assert sw["out_frac"] == of and sw["out_frac_source"] == "given"
        p = np.exp(np.clip(r["z"] - sw["beta"], CLAMP_LO, CLAMP_HI)) / sw["gamma"]
        expect = float(np.mean(p > 255 * 2.0**-of))
        assert expect > 0.3
        assert sw["saturate_frac"] == pytest.approx(expect, abs=2 / p.size)
        flag = [f for f in e["flags"] if "SwiftMax P saturate" in f]
        assert flag == [f"layer {e['layer']}: {100 * sw['saturate_frac']:.3g}% of SwiftMax P saturate at 255·2^{-of}"]


def test_without_padding_beta_gamma_equal_collect_softmax_stats(tiny_ckpt, sentences, tmp_path):
    from transformers import AutoModel, AutoTokenizer

    few = sentences[:4]
    report = profile.run_profile(tiny_ckpt, few, tmp_path, plots=False, batch_size=1)
    tok = AutoTokenizer.from_pretrained(tiny_ckpt)
    model = AutoModel.from_pretrained(tiny_ckpt, dtype=torch.float32).eval()
    stats = calibrate.collect_softmax_stats(model, [dict(tok([s], return_tensors="pt")) for s in few])
    for e, s in zip(report["layers"], stats, strict=True):
        assert e["swiftmax"]["rows"] == s["rows"]
        assert e["swiftmax"]["beta"] == pytest.approx(s["beta"], rel=1e-6)
        assert e["swiftmax"]["gamma"] == pytest.approx(s["gamma"], rel=1e-6)


def test_json_on_stdout(tiny_ckpt, data_file, tmp_path):
    rc, stdout, stderr = _run(["profile", str(tiny_ckpt), "--data", str(data_file), "--out", str(tmp_path),
                               "--json", "-", "--max-sentences", "3"])
    assert rc == 0, stderr
    report = json.loads(stdout)
    assert report["data"]["sentences"] == 3 and len(report["layers"]) == 2


# --------------------------------------------------------------------------- errors


def _one_line_error(argv: list[str], *words: str) -> None:
    rc, stdout, stderr = _run(argv)
    assert rc == 4  # a bad input file or checkpoint (README "Exit statuses"), as for `export` and `run`
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert stderr.startswith("vckattn: error: ") and "Traceback" not in stderr + stdout
    for w in words:
        assert w in stderr, (w, stderr)


def test_missing_folder(tmp_path, data_file):
    _one_line_error(["profile", str(tmp_path / "nope"), "--data", str(data_file)], "does not exist")


def test_folder_without_config(tmp_path, data_file):
    _one_line_error(["profile", str(tmp_path), "--data", str(data_file)], "config.json")


def test_empty_data_file(tiny_ckpt, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n", encoding="utf-8")
    _one_line_error(["profile", str(tiny_ckpt), "--data", str(empty)], "no sentences")


def test_missing_data_file(tiny_ckpt, tmp_path):
    _one_line_error(["profile", str(tiny_ckpt), "--data", str(tmp_path / "x.txt")], "does not exist")


def test_unsupported_model_type(tmp_path, data_file):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}), encoding="utf-8")
    _one_line_error(["profile", str(tmp_path), "--data", str(data_file)], "unsupported model_type", "gpt2")


# --------------------------------------------------------------------------- the real MiniLM


def test_real_minilm(tmp_path):
    rc, stdout, stderr = _run(["profile", "minilm", "--max-sentences", "16", "--out", str(tmp_path)])
    assert rc == 0, stderr
    assert "no --data given" in stdout and "all-MiniLM-L6-v2" in stdout
    report = json.loads((tmp_path / "profile.json").read_text(encoding="utf-8"))
    assert report["model"]["name"] == "all-MiniLM-L6-v2" and report["data"]["sentences"] == 16
    assert len(report["layers"]) == 6 and len(report["plots"]) == 6
    for e in report["layers"]:
        assert e["quantities"]["sum_exp"]["min"] >= 1.0 - 1e-5
        assert e["quantities"]["sum_exp"]["max"] <= e["online_softmax"]["longest_row"] + 1e-3
        assert e["tanh"]["max_abs_arg"] <= e["tanh"]["bound"] + 1e-5  # 2·√384/10 ≈ 3.92 < 8: never saturates
        assert e["tanh"]["overflow_frac"] == 0.0
        acc = e["accumulator"]
        assert acc["max_abs_acc"] <= acc["int8_bound"] * (1 + 1e-6) and acc["overflow_frac"] == 0.0
        assert e["swiftmax"]["registers"] is not None
    # layer 0 has a few heads with very large scores (z_max up to ~40): P's format must stretch far
    assert report["layers"][0]["quantities"]["z_max"]["max"] > 20
