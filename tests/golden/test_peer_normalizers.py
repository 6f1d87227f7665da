"""SwiftMax's peers on their integer paths: HCCS (aie4ml's int8 kernel) and softmax on int8 scores.

The expected HCCS codes below are worked by hand from the kernel's formula (aie4ml, softmax_i8::softmax_row:
``d = min(m - x, Dmax)``, ``e = B - S·d``, ``inv = floor(255·2^15 / Σe)``, ``P = floor(e·inv / 2^15)``), not
produced by the code under test.
"""

from __future__ import annotations

import pytest
import torch

from vckattn.golden.calibrate import CONSMAX_INIT, LayerStats, consmax_init, hccs_candidates
from vckattn.golden.normalizers import HCCS, QuantizedSoftmax, hccs, hccs_check, hccs_int, softmax


def test_hccs_int_matches_the_kernel_worked_by_hand():
    # m = 10; d = 0, 3, 7, min(60, 10) = 10; e = 100, 88, 72, 60; Σ = 320; inv = 8355840 // 320 = 26112
    # P = floor(e·26112 / 32768) = 79 (79.69), 70 (70.13), 57 (57.38), 47 (47.81)
    codes = torch.tensor([[[[10, 7, 3, -50]]]])
    p = hccs_int(codes, torch.tensor(100), torch.tensor(4), torch.tensor(10))
    assert p.tolist() == [[[[79, 70, 57, 47]]]]


def test_hccs_int_masked_columns_are_zero_and_left_out_of_max_and_sum():
    # the masked 50 would be the max; without it: m = 10, e = 100, 88, 72, Σ = 260, inv = 8355840 // 260 = 32137
    # P = floor(100·32137/32768) = 98 (98.07), floor(88·32137/32768) = 86 (86.30), floor(72·32137/32768) = 70 (70.61)
    codes = torch.tensor([[[[10, 7, 3, 50]]]])
    keep = torch.tensor([[[[True, True, True, False]]]])
    p = hccs_int(codes, torch.tensor(100), torch.tensor(4), torch.tensor(10), keep)
    assert p.tolist() == [[[[98, 86, 70, 0]]]]
    none = hccs_int(codes, torch.tensor(100), torch.tensor(4), torch.tensor(10), torch.zeros_like(keep))
    assert none.tolist() == [[[[0, 0, 0, 0]]]]


def _scores(shape=(2, 3, 5, 7), seed=0, step=0.05):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g) * 2.0, step


def test_hccs_float_forward_is_the_integer_kernel_and_keeps_shape_and_mask():
    z, step = _scores()
    b, s, d = torch.tensor([200, 300, 500]), torch.tensor([2, 1, 4]), torch.tensor([40, 120, 100])
    keep = torch.ones(2, 1, 5, 7, dtype=torch.bool)
    keep[0, :, :, 5:] = False
    keep[1, :, 2, :] = False  # one fully masked row
    p = HCCS(b, s, d, step)(z, keep)
    assert p.shape == z.shape
    assert torch.all(p[~keep.expand_as(p)] == 0)
    codes = torch.clamp(torch.floor(z / step + 0.5), -127, 127)
    assert torch.equal(p * 256, hccs_int(codes, b, s, d, keep).float())


def test_hccs_keeps_the_order_of_the_scores_and_rows_sum_to_at_most_one():
    z, step = _scores(seed=1)
    b, s, d = torch.tensor([200, 300, 500]), torch.tensor([2, 1, 4]), torch.tensor([40, 120, 100])
    p = hccs(z, b, s, d, step)
    order = torch.argsort(z, dim=-1)
    sorted_p = torch.gather(p, -1, order)
    assert torch.all(sorted_p[..., 1:] >= sorted_p[..., :-1])  # monotone: never reverses two scores
    total = p.sum(-1)
    assert torch.all(total <= 255 / 256 + 1e-6)
    assert torch.all(total >= 255 / 256 - z.shape[-1] / 256)  # each floor loses less than one code


def test_hccs_per_head_constants_reach_their_own_head():
    z, step = _scores(seed=2)
    # head 0: Dmax 0 makes every score B: uniform; heads 1 and 2 follow their scores
    p = hccs(z, torch.tensor([300, 300, 300]), torch.tensor([1, 2, 2]), torch.tensor([0, 100, 100]), step)
    assert torch.all(p[:, 0] == p[:, 0, :, :1])
    assert not torch.all(p[:, 1] == p[:, 1, :, :1])


def test_hccs_gradient_reaches_the_scores_straight_through():
    z, step = _scores(seed=3)
    z.requires_grad_(True)
    p = hccs(z, torch.tensor(400), torch.tensor(2), torch.tensor(100), step)
    (p * torch.randn_like(p)).sum().backward()
    assert torch.isfinite(z.grad).all() and z.grad.abs().sum() > 0


@pytest.mark.parametrize("b,s,d,cols", [(10, 1, 11, 64),  # B - S·Dmax < 0
                                        (600, 1, 10, 64),  # cols·B > 32767
                                        (100, 1, 98, 64),  # cols·(B - S·Dmax) = 128 < 256
                                        (100, 200, 0, 64)])  # S > 127
def test_hccs_check_refuses_what_the_kernel_cannot_hold(b, s, d, cols):
    with pytest.raises(ValueError):
        hccs_check(torch.tensor(b), torch.tensor(s), torch.tensor(d), cols)


def test_hccs_candidates_all_fit_the_kernel():
    c = hccs_candidates(64)
    assert len(c) > 100
    hccs_check(c[:, 0], c[:, 1], c[:, 2], 64)
    assert int(c[:, 0].max()) * 64 <= 32767


def test_quantized_softmax_on_grid_scores_is_softmax_rounded_to_its_format():
    step = 0.125
    g = torch.Generator().manual_seed(4)
    z = torch.randint(-40, 41, (2, 3, 4, 9), generator=g).float() * step  # on the score grid: not moved
    keep = torch.ones(2, 1, 4, 9, dtype=torch.bool)
    keep[..., 7:] = False
    p = QuantizedSoftmax(step)(z, keep)
    ref = softmax(z, keep)
    assert torch.all(p[~keep.expand_as(p)] == 0)
    assert torch.all((p * 256) == torch.round(p * 256))  # on the 2^-8 grid
    assert torch.all(p <= 255 / 256)
    assert torch.all((p - torch.clamp(ref, max=255 / 256)).abs() <= 0.5 / 256 + 1e-7)


def test_consmax_init_is_the_fixed_constants_per_head():
    stats = [LayerStats(torch.zeros(6).numpy(), torch.ones(6).numpy(), torch.tensor([0, 1, 2, 0, 1, 2]).numpy())
             for _ in range(2)]
    betas, gammas = consmax_init(stats, per_head=True)
    assert betas == [[CONSMAX_INIT[0]] * 3] * 2 and gammas == [[CONSMAX_INIT[1]] * 3] * 2
    assert consmax_init(stats) == ([2.5, 2.5], [100.0, 100.0])
