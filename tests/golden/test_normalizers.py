"""Normalizers against references written independently of the code under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vckattn.golden.normalizers import (
    SwiftMax,
    make_normalizer,
    online_softmax,
    softermax,
    softmax,
    swiftmax,
)

F64 = torch.float64


def _scores(gen: torch.Generator, shape=(2, 3, 7, 37), scale=4.0) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=F64) * scale


def _random_keep(gen: torch.Generator, shape) -> torch.Tensor:
    keep = torch.rand(shape, generator=gen) > 0.3
    keep[..., 0] = True  # at least one key per row
    return keep


def test_softmax_matches_torch(gen):
    z = _scores(gen)
    torch.testing.assert_close(softmax(z), torch.softmax(z, dim=-1), rtol=0, atol=1e-12)


def test_softmax_masked_is_exact_zero_and_matches_torch(gen):
    z = _scores(gen)
    keep = _random_keep(gen, z.shape)
    p = softmax(z, keep)
    assert torch.all(p[~keep] == 0)
    ref = torch.softmax(z.masked_fill(~keep, float("-inf")), dim=-1)
    torch.testing.assert_close(p, ref, rtol=0, atol=1e-12)


def test_fully_masked_row_is_zero_not_nan(gen):
    z = _scores(gen, (1, 1, 3, 5))
    keep = torch.ones_like(z, dtype=torch.bool)
    keep[0, 0, 1] = False
    for fn in (softmax, online_softmax, softermax):
        p = fn(z, keep)
        assert torch.isfinite(p).all(), fn.__name__
        assert torch.all(p[0, 0, 1] == 0), fn.__name__


@pytest.mark.parametrize("block", [1, 4, 16, 37, 64])
def test_online_softmax_equals_softmax_fp64(gen, block):
    z = _scores(gen, scale=20.0)  # large spread: forces many running-max updates
    keep = _random_keep(gen, z.shape)
    torch.testing.assert_close(online_softmax(z, keep, block), softmax(z, keep), rtol=0, atol=1e-6)
    # and much tighter than the required 1e-6
    assert float((online_softmax(z, keep, block) - softmax(z, keep)).abs().max()) < 1e-13


def test_online_softmax_increasing_scores_rescale(gen):
    # Monotone rows make every block raise the running max: the rescale path is exercised.
    z = torch.linspace(-50, 50, 200, dtype=F64).repeat(2, 1)
    torch.testing.assert_close(online_softmax(z, None, 7), torch.softmax(z, -1), rtol=0, atol=1e-13)


@pytest.mark.parametrize("block", [1, 5, 16])
def test_softermax_is_base2_softmax(gen, block):
    z = _scores(gen, scale=10.0)
    keep = _random_keep(gen, z.shape)
    ref = torch.softmax((z * math.log(2.0)).masked_fill(~keep, float("-inf")), dim=-1)
    torch.testing.assert_close(softermax(z, keep, block), ref, rtol=0, atol=1e-13)


def test_softermax_prescaled_equals_softmax(gen):
    z = _scores(gen)
    sm = make_normalizer("softermax", prescale=True)
    torch.testing.assert_close(sm(z), torch.softmax(z, -1), rtol=0, atol=1e-13)


def _swiftmax_numpy(z: np.ndarray, beta, gamma, base: float) -> np.ndarray:
    """METHODS.md: out = base^(clamp(x - beta, -10, 40)) / gamma, element by element."""
    out = np.empty_like(z)
    for idx in np.ndindex(z.shape):
        h = idx[1]
        b = beta[h] if np.ndim(beta) else beta
        g = gamma[h] if np.ndim(gamma) else gamma
        t = min(max(z[idx] - b, -10.0), 40.0)
        out[idx] = base**t / g
    return out


@pytest.mark.parametrize("base", ["e", "2"])
def test_swiftmax_per_layer_matches_formula(gen, base):
    z = _scores(gen, (2, 3, 4, 9), scale=15.0)  # wide: hits both clamp bounds
    beta, gamma = 2.5, 100.0
    got = swiftmax(z, torch.tensor(beta, dtype=F64), torch.tensor(gamma, dtype=F64), base=base)
    ref = _swiftmax_numpy(z.numpy(), beta, gamma, math.e if base == "e" else 2.0)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-13, atol=0)


def test_swiftmax_per_head_matches_formula(gen):
    z = _scores(gen, (2, 3, 4, 9), scale=5.0)
    beta = np.array([0.5, 2.5, -1.0])
    gamma = np.array([3.0, 100.0, 0.25])
    got = swiftmax(z, torch.tensor(beta), torch.tensor(gamma))
    np.testing.assert_allclose(got.numpy(), _swiftmax_numpy(z.numpy(), beta, gamma, math.e), rtol=1e-13)


def test_swiftmax_clamp_bounds():
    z = torch.tensor([[[[-1e4, 1e4, 2.5]]]], dtype=F64)
    p = swiftmax(z, torch.tensor(2.5, dtype=F64), torch.tensor(1.0, dtype=F64))
    assert p[0, 0, 0, 0] == pytest.approx(math.exp(-10.0), rel=1e-15)
    assert p[0, 0, 0, 1] == pytest.approx(math.exp(40.0), rel=1e-15)
    assert p[0, 0, 0, 2] == 1.0


def test_swiftmax_mask_exact_zero_and_no_row_dependency(gen):
    z = _scores(gen)
    keep = _random_keep(gen, z.shape)
    sm = SwiftMax(beta=1.0, gamma=7.0).double()
    p = sm(z, keep)
    assert torch.all(p[~keep] == 0)
    # element-wise: changing one score changes only its own output
    z2 = z.clone()
    z2[0, 0, 0, 3] += 5.0
    p2 = sm(z2, keep)
    diff = (p2 != p).nonzero().tolist()
    assert diff in ([], [[0, 0, 0, 3]])


def test_swiftmax_rejects_bad_parameters(gen):
    with pytest.raises(ValueError, match="gamma"):
        SwiftMax(gamma=0.0)
    with pytest.raises(ValueError, match="base"):
        SwiftMax(base="10")
    sm = SwiftMax(num_heads=4)
    with pytest.raises(ValueError, match="per head"):
        sm(torch.zeros(1, 3, 2, 2))
    with torch.no_grad():
        sm.gamma[1] = -1.0
    with pytest.raises(ValueError, match="gamma"):
        sm.check()


@pytest.mark.parametrize("num_heads", [None, 3])
@pytest.mark.parametrize("base", ["e", "2"])
def test_gradcheck_swiftmax_beta_gamma(gen, num_heads, base):
    z = torch.randn(1, 3, 3, 5, generator=gen, dtype=F64) * 2 + 2.0  # inside the clamp range
    keep = _random_keep(gen, z.shape)
    shape = () if num_heads is None else (num_heads,)
    beta = torch.full(shape, 1.5, dtype=F64, requires_grad=True)
    gamma = torch.full(shape, 3.0, dtype=F64, requires_grad=True)
    zr = z.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda zz, b, g: swiftmax(zz, b, g, keep, base), (zr, beta, gamma))


def test_swiftmax_gradient_values(gen):
    # d/dbeta exp(z - beta)/gamma = -p ; d/dgamma = -p/gamma  (analytic, unclamped)
    z = torch.randn(1, 1, 2, 4, generator=gen, dtype=F64)
    beta = torch.tensor(0.3, dtype=F64, requires_grad=True)
    gamma = torch.tensor(2.0, dtype=F64, requires_grad=True)
    p = swiftmax(z, beta, gamma)
    p.sum().backward()
    assert beta.grad.item() == pytest.approx(-p.sum().item(), rel=1e-12)
    assert gamma.grad.item() == pytest.approx(-p.sum().item() / 2.0, rel=1e-12)


def test_swiftmax_saturation_p_max(gen):
    """A saturating SwiftMax (a layer tuned for its P format): min(p, p_max), no gradient above it, masked still
    exactly 0; p_max is a buffer saved with the model only when set."""
    z = _scores(gen, (2, 3, 4, 9), scale=6.0)
    keep = _random_keep(gen, z.shape)
    beta = torch.tensor([0.5, 2.5, -1.0], dtype=F64, requires_grad=True)
    gamma = torch.tensor([3.0, 10.0, 0.25], dtype=F64, requires_grad=True)
    free = swiftmax(z, beta, gamma, keep)
    p = swiftmax(z, beta, gamma, keep, p_max=0.99609375)
    ref = np.minimum(_swiftmax_numpy(z.numpy(), beta.detach().numpy(), gamma.detach().numpy(), math.e), 0.99609375)
    np.testing.assert_allclose(p.detach().numpy(), np.where(keep.numpy(), ref, 0.0), rtol=1e-13, atol=0)
    assert bool((free > 0.99609375).any()) and float(p.detach().max()) == 0.99609375 and torch.all(p[~keep] == 0)
    (p * (free > 0.99609375)).sum().backward()  # only saturated elements: no gradient reaches β/γ
    assert torch.all(beta.grad == 0) and torch.all(gamma.grad == 0)

    sm = SwiftMax(1.0, 2.0, num_heads=3).double()
    assert "p_max" not in sm.state_dict() and sm.p_max is None
    sm.set_p_max(0.99609375)
    assert float(sm.state_dict()["p_max"]) == 0.99609375 and "p_max=0.996094" in repr(sm)
    np.testing.assert_array_equal(sm(z, keep).detach().numpy(),
                                  swiftmax(z, sm.beta, sm.gamma, keep, p_max=0.99609375).detach().numpy())
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="p_max"):
            sm.set_p_max(bad)
    sm.set_p_max(None)
    assert "p_max" not in sm.state_dict()
