"""The stage list (golden/stages.py): each stage reads and writes what its declaration says, the families keep the
declared order, a stage a caller takes replaces golden's (and a wrong one shows up as the first stage that differs),
and the committed manifests place stages only where the declaration lets them run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from vckattn.golden.attention import rope_cos_sin
from vckattn.golden.blocks import LlamaBlock
from vckattn.golden.stages import (
    FAMILY_INPUT,
    FAMILY_STAGES,
    GOLDEN,
    STAGES,
    StageInputs,
    attention_int,
    run_stages,
    stages_of,
    sublayer_int,
)
from vckattn.golden.sublayer import calibrate_decoder, quantize_input, rope_tables


@pytest.fixture(scope="module")
def decoder():
    """A small BHyT decoder sublayer (GQA, RoPE, causal) and its int8 block input with padding and RoPE tables."""
    torch.manual_seed(0)
    blk = LlamaBlock(48, 6, 2, 96, "bhyt", seq_len=16).double()
    with torch.no_grad():
        blk.bhyt.weight_attn.uniform_(0.5, 1.5)
    blk.refresh_c_attn()
    h = torch.randn(2, 12, 48, generator=torch.Generator().manual_seed(1), dtype=torch.float64).numpy()
    keep = np.ones((2, 12), bool)
    keep[1, 9:] = False
    rope = rope_cos_sin(torch.arange(12), 8, dtype=torch.float64)
    sub = calibrate_decoder(blk.attn, blk.bhyt, h, keep, rope, "swiftmax", 4.0, 3.0)
    return sub, quantize_input(h, sub.s_h), keep, tuple(rope_tables(rope, 2, 12, 8))


def test_families_keep_the_declared_order():
    order = list(STAGES)
    for fam, stages in FAMILY_STAGES.items():
        assert list(stages) == sorted(stages, key=order.index), fam
        assert "attention" in stages and set(stages) <= set(GOLDEN)
    assert set(GOLDEN) == set(STAGES)
    assert all(STAGES[s].places for s in STAGES) and STAGES["attention"].places == ("aie",)


def test_each_stage_reads_and_writes_what_it_declares(decoder):
    """Every stage finds what it reads in the trace and changes nothing but what it declares it writes (the
    attention input ``in`` and the residual input ``res`` are the block input; ``keep`` is the key mask the qkv
    stage derives)."""
    sub, hi, keep, rope = decoder
    seen = []

    def watch(name, t, c):
        decl = STAGES[name]
        for r in decl.reads:
            assert r in t, f"{name} reads {r}, absent"
        before = {k: v.copy() for k, v in t.items()}
        GOLDEN[name](t, c)
        changed = {k for k in t if k not in before or not np.array_equal(t[k], before[k])}
        assert changed <= set(decl.writes) | {"keep"}, f"{name} wrote {changed - set(decl.writes)}"
        assert set(decl.writes) <= set(t), f"{name} left {set(decl.writes) - set(t)} unwritten"
        seen.append(name)
        return True

    t = run_stages(stages_of(sub, True), {"h": hi, "in": hi, "res": hi}, StageInputs(sub, sub.attn, keep, rope),
                   watch)
    assert seen == list(FAMILY_STAGES["decoder"])
    out, golden = sublayer_int(sub, hi, keep, rope)
    assert np.array_equal(t["out"], out)
    for k, v in golden.items():
        assert np.array_equal(t[k], v), k


def test_a_stage_the_caller_takes_replaces_golden(decoder):
    """A caller that runs one stage itself (a device) gets the rest from golden; a wrong result in its stage flows
    into every later stage and the output, and not into the stages before it."""
    sub, hi, keep, rope = decoder
    _, golden = sublayer_int(sub, hi, keep, rope)

    def wrong_v(name, t, c):
        if name != "qkv":
            return False
        GOLDEN[name](t, c)
        t["v"] = t["v"].copy()
        t["v"][0, 0, 0, 0] ^= 1
        return True

    t = run_stages(FAMILY_STAGES["decoder"], {"h": hi, "in": hi, "res": hi}, StageInputs(sub, sub.attn, keep, rope),
                   wrong_v)
    for name in ("stat", "u", "q", "k"):
        assert np.array_equal(t[name], golden[name]), name
    assert not np.array_equal(t["v"], golden["v"]) and not np.array_equal(t["o"], golden["o"])


def test_the_attention_core_is_the_sublayer_without_its_other_stages(decoder):
    """attention_int (float input, flat trace) and the attention core's stage list on the same int8 input give the
    integers of the decoder's own attention stages on site A's output."""
    sub, hi, keep, rope = decoder
    _, dec = sublayer_int(sub, hi, keep, rope)
    y, core = sublayer_int(sub.attn, dec["u"], keep, rope)
    assert stages_of(sub.attn, True) == ("qkv", "rope", "attention", "o_proj")
    assert stages_of(sub.attn, False) == ("qkv", "attention", "o_proj")
    for name in ("q", "k", "v", "a", "y"):
        assert np.array_equal(core[name], dec[name]), name
    assert np.array_equal(y, dec["y"])
    _, flat = attention_int(sub.attn, dec["u"], keep, x_is_int=True,
                            rope=rope_cos_sin(torch.arange(12), 8, dtype=torch.float64))
    b, heads, s, d = dec["q"].shape
    assert np.array_equal(flat["q"], dec["q"].transpose(0, 2, 1, 3).reshape(b, s, heads * d))
    assert np.array_equal(flat["y"], dec["y"])
    with pytest.raises(ValueError, match="RoPE tables"):
        sublayer_int(sub, hi, keep)
    assert FAMILY_INPUT == {"encoder": "x", "decoder": "h", "attention": "x"}
