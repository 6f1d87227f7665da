"""Tuning on the deployed numerics: the float path of `vckattn calibrate swiftmax` narrows scores to the engine's
8-bit grid and rounds P to its format (straight-through gradients), as the committed designs compute them."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tests.hf_tiny import right_padding, tiny_bert
from vckattn.golden import calibrate as cal
from vckattn.golden.engine import narrow_scores
from vckattn.golden.normalizers import SwiftMax, narrow_scores_ste, round_ste
from vckattn.golden.swiftmax_int import saturation


def test_narrow_scores_ste_is_the_engine_narrowing_in_float():
    """On accumulators ``acc`` at LSB ``u`` (z = acc·u), narrowing with step ``u·2^shift`` gives the integer engine's
    ``narrow_scores(acc, shift, 8)`` times that step, for every shift, including ties and saturation."""
    rng = np.random.default_rng(1)
    acc = np.concatenate([rng.integers(-40000, 40000, 4000), [0, 1, -1, 2, -2, 3, -3, 127, -127, 128, 4095]])
    u = 2.0**-7  # a power of two: z/step is exact, so ties stay ties in float
    for shift in (0, 1, 3, 7, 9):
        want = narrow_scores(acc, shift, 8).astype(np.float64) * (u * 2.0**shift)
        got = narrow_scores_ste(torch.tensor(acc * u, dtype=torch.float64), u * 2.0**shift, 8).numpy()
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_straight_through_gradients():
    """The roundings pass the gradient through unchanged; the saturated scores pass none (the clamp)."""
    x = torch.tensor([0.2, 0.5, 1.49, -2.5], dtype=torch.float64, requires_grad=True)
    y = round_ste(x)
    assert y.detach().tolist() == [0.0, 1.0, 1.0, -2.0]  # half up, as the kernels round
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0, 1.0]
    z = torch.tensor([0.3, 1000.0, -1000.0], dtype=torch.float64, requires_grad=True)
    n = narrow_scores_ste(z, 0.5, 8)
    assert n.detach().tolist() == [0.5, 63.5, -63.5]
    n.sum().backward()
    assert z.grad.tolist() == [1.0, 0.0, 0.0]


def test_swiftmax_on_the_deployed_numerics_rounds_p_and_still_learns():
    """With ``set_deployed``, every P is a multiple of the format's LSB 2^-8 and at most its top; β and γ still get
    a gradient (straight through), equal to the float path's where no rounding moves across a level."""
    torch.manual_seed(0)
    z = torch.randn(2, 3, 5, 7, dtype=torch.float64) * 3
    n = SwiftMax(1.0, 2.0, num_heads=3, p_max=saturation(8)).double()
    n.set_deployed(score_step=0.05, score_bits=8, p_round=True)
    p = n(z)
    codes = p.detach() * 256
    assert torch.equal(codes, torch.round(codes)) and float(p.detach().max()) <= saturation(8)
    assert float(p.detach().max()) == saturation(8)  # some scores reach the top
    p.sum().backward()
    assert n.beta.grad is not None and bool((n.beta.grad != 0).all())
    with pytest.raises(ValueError, match="p_max"):
        SwiftMax(1.0, 2.0).set_deployed(0.1, 8, p_round=True)
    with pytest.raises(ValueError, match="score_step"):
        SwiftMax(1.0, 2.0).set_deployed(0.0, 8)
    plain = SwiftMax(1.0, 2.0, num_heads=3, p_max=saturation(8)).double()
    assert not torch.equal(plain(z), p)  # the deployed path is not the float one


def _train():
    g = torch.Generator().manual_seed(0)
    return [{"input_ids": torch.randint(1, 120, (4, 12), generator=g),
             "attention_mask": right_padding([12, 9, 5, 12], 12).long()} for _ in range(3)]


def test_score_steps_fit_the_scores_into_8_bits():
    """Each layer's modeled LSB (max-abs scales, as `export --calib-method minmax`) keeps every unmasked score of the
    batches within ±127.5 LSB (no saturation beyond what q/k rounding adds) and uses at least half the range (the
    shift is the smallest), and 32-bit scores are not narrowed."""
    from vckattn.golden.convert import recording

    model = tiny_bert()
    train = _train()
    steps = cal.score_steps(model, train, 8, percentile=100.0)
    assert len(steps) == 2 and all(s > 0 for s in steps)
    with recording(model) as recs:
        zabs = [0.0, 0.0]
        for i, a in enumerate(cal.attention_modules(model)):
            def rec(q, k, keep, scale, i=i):
                z = torch.matmul(q, k.transpose(-1, -2)) * scale
                zabs[i] = max(zabs[i], float(torch.where(keep.expand_as(z), z.abs(), 0).max()))
            a.vckattn_qk_record = rec
        with torch.no_grad():
            for b in train:
                model(**b)
        for a in cal.attention_modules(model):
            a.vckattn_qk_record = None
    assert recs[0]  # the model ran with the vckattn attention
    for zmax, s in zip(zabs, steps, strict=True):
        assert 60 < zmax / s <= 128.5, (zmax, s)
    assert cal.score_steps(model, train, 32) == [0.0, 0.0]


def test_replace_and_tune_on_the_deployed_numerics_checkpoints_them(tmp_path):
    """Tuned layers compute the deployed numerics during and after tuning; the checkpoints record them (a resume on
    other numerics is refused); tuning still improves the held-out objective."""
    model = tiny_bert()
    train = _train()
    with torch.no_grad():
        teacher = [cal.mean_pool(model(**b).last_hidden_state, b["attention_mask"]) for b in train]

    def loss_fn(m, b):
        i = next(j for j, t in enumerate(train) if t is b)
        return cal.embedding_distillation_loss(cal.mean_pool(m(**b).last_hidden_state, b["attention_mask"]),
                                               teacher[i])

    def eval_fn(m):
        return float(1 - sum(loss_fn(m, b) for b in train) / len(train))

    init = cal.propose_init(cal.collect_stats(model, train), "mean", per_head=True)
    init = ([[v + 2.0 for v in b] for b in init[0]], init[1])  # a poor start: tuning must recover
    dep = cal.Deployed(8, tuple(cal.score_steps(model, train, 8)), p_round=True)
    start = tiny_bert()
    cal.apply_swiftmax(start, {0: init[0][0], 1: init[0][1]}, {0: init[1][0], 1: init[1][1]}, p_max=saturation(8),
                       deployed=dep)
    before = eval_fn(start)
    kw = dict(epochs_per_stage=3, lr=0.1, ckpt_dir=tmp_path, config={"run": "deployed"}, p_max=saturation(8))
    logs = cal.replace_and_tune(model, lambda: train, loss_fn, eval_fn, init, deployed=dep, **kw)
    assert logs[-1].metrics[-1] > before
    sm = cal.swiftmax_layers(model)
    assert [float(n.score_step) for n in sm.values()] == pytest.approx(list(dep.score_steps), rel=1e-6)
    assert all(n.p_round and n.score_bits == 8 for n in sm.values())
    cfg = json.loads((tmp_path / "swiftmax_stage01.json").read_text())["config"]
    assert cfg["deployed"] == dep.identity()
    again = tiny_bert()
    cal.replace_and_tune(again, lambda: train, loss_fn, eval_fn, init, deployed=dep, **kw)  # resumes
    assert all(n.score_step is not None for n in cal.swiftmax_layers(again).values())
    with pytest.raises(ValueError, match="different configuration"):
        cal.replace_and_tune(tiny_bert(), lambda: train, loss_fn, eval_fn, init, **kw)


def test_cli_tunes_on_the_committed_designs_score_width_by_default(tmp_path):
    """`vckattn calibrate swiftmax` without --score-bits tunes on the committed default design's score width (read
    from its manifest, 8 bits) with a score LSB per layer, and rounds P with --p-frac; --score-bits 32 keeps float
    scores (P still rounded); the report records which."""
    from vckattn.host.cli import main
    from vckattn.hw.design.manifest import default_manifest, load_manifest

    bits = int(load_manifest(default_manifest()).data["engine"]["score_bits"])
    common = ["--data", "pydoc", "--train-samples", "8", "--eval-samples", "4", "--batch-size", "4", "--max-length",
              "16", "--layers", "0", "--epochs-per-stage", "1", "--per-head", "--p-frac", "8", "--device", "cpu",
              "--quiet"]
    assert main(["calibrate", "swiftmax", "minilm", "--out", str(tmp_path / "a"), *common]) == 0
    dep = json.loads((tmp_path / "a" / "swiftmax.json").read_text())["deployed"]
    assert bits == 8 and dep["score_bits"] == bits and dep["p_round"] is True
    assert len(dep["score_steps"]) == 6 and all(s > 0 for s in dep["score_steps"])
    assert main(["calibrate", "swiftmax", "minilm", "--out", str(tmp_path / "b"), "--score-bits", "32", *common]) == 0
    dep = json.loads((tmp_path / "b" / "swiftmax.json").read_text())["deployed"]
    assert dep["score_bits"] == 32 and dep["p_round"] is True
