"""Step 4 of the export: the SwiftMax β/γ and the BHyT site constants of a layer.

The full description: ``docs/internals/host.md``, section ``host/export/constants.py``.
"""

from __future__ import annotations

import numpy as np
import torch

from vckattn.golden.bhyt import mean_square
from vckattn.golden.bhyt_int import bhyt_site_registers
from vckattn.golden.calibrate import INIT_MODES, RowSummary, init_beta_gamma
from vckattn.golden.convert import row_stats

from .capture import Captured
from .quantize import Range
from .reference import float_layer
from .sources import LoadedModel

#: SwiftMax β/γ initialisations from calibration statistics (when the checkpoint has none), described
SWIFTMAX_INITS = INIT_MODES


@torch.no_grad()
def calibration_rows(m: LoadedModel, i: int, cap: Captured) -> tuple[RowSummary, list[RowSummary]]:
    """The softmax rows of layer ``i``'s calibration scores (row max ``z_max``, ``S``; rows with a key only):
    the layer's summary and one per query head."""
    ly = m.layers[i]
    zm, se, hd = [], [], []
    for x, rope, b in zip(cap.x[i], cap.rope[i], cap.batches, strict=True):
        f = float_layer(m, ly, x.astype(np.float64), b.keep, rope, "softmax", 0.0, 1.0)
        st = row_stats(f["z"], f["keep4"])
        zm.append(st.z_max)
        se.append(st.sum_exp)
        hd.append(st.head)
    z, s, h = torch.cat(zm), torch.cat(se), torch.cat(hd)
    heads = [RowSummary.of(z[h == j], s[h == j]) for j in range(ly.mha.n_heads)]
    return RowSummary.of(z, s), heads


def swiftmax_beta_gamma(m: LoadedModel, i: int, cap: Captured, swiftmax_init: str = "max", per_head: bool = True
                        ) -> tuple[np.ndarray, np.ndarray, str]:
    """``(β, γ, source)`` of SwiftMax layer ``i``, one value per query head: the checkpoint's
    (``source="checkpoint"``; per-layer constants repeated for every head), else :func:`init_beta_gamma` of
    its calibration rows with ``swiftmax_init``, per head (``per_head``) or one for the layer
    (``source="calibration"``). A head with no calibration row takes the layer's values."""
    ly = m.layers[i]
    n = ly.mha.n_heads
    if ly.swiftmax is not None:
        b, g = (np.broadcast_to(np.asarray(v, np.float64), (n,)).copy() for v in ly.swiftmax)
        return b, g, "checkpoint"
    layer, heads = calibration_rows(m, i, cap)
    lb, lg = init_beta_gamma(layer, swiftmax_init)
    if not per_head:
        return np.full(n, lb), np.full(n, lg), "calibration"
    pairs = [init_beta_gamma(h, swiftmax_init) for h in heads]
    b = np.array([pb if np.isfinite(pb) else lb for pb, _ in pairs])
    g = np.array([pg if np.isfinite(pg) else lg for _, pg in pairs])
    return b, g, "calibration"


@torch.no_grad()
def bhyt_scales(m: LoadedModel, i: int, cap: Captured, method: str, percentile: float) -> tuple[float, float, float]:
    """The int8 scales around BHyT layer ``i``'s sites, ``(s_h, s_mid, s_mlp)``: the block input ``h`` (site A's input
    and statistic, the residual input), ``h' = h + Attn(u)`` (the residual output, site M's input) and site M's output,
    over every position of the calibration tensors (``method``, ``percentile`` as every other scale)."""
    nb = m.layers[i].bhyt
    assert nb is not None
    r_h, r_mid, r_v = (Range(method, percentile, seed=10 + j) for j in range(3))
    for h, y in zip(cap.h[i], cap.attn_out[i], strict=True):
        ht = torch.from_numpy(h.astype(np.float64))
        mid = ht + torch.from_numpy(y.astype(np.float64))
        v = nb.mlp_site(mid, mean_square(ht))
        r_h.add(ht.numpy())
        r_mid.add(mid.numpy())
        r_v.add(v.numpy())
    return r_h.scale(), r_mid.scale(), r_v.scale()


@torch.no_grad()
def bhyt_registers(m: LoadedModel, i: int, cap: Captured, s_x: float, method: str, percentile: float,
                   scales: tuple[float, float, float] | None = None) -> tuple[dict, tuple[np.ndarray, np.ndarray]]:
    """Site A/M registers of BHyT layer ``i`` (golden bhyt_site_registers) from calibrated scales (``scales``: those
    of :func:`bhyt_scales`, computed when not given): the manifest's ``bhyt`` entry and the two sites' integer γ
    vectors."""
    nb = m.layers[i].bhyt
    assert nb is not None
    s_h, s_mid, s_mlp = bhyt_scales(m, i, cap, method, percentile) if scales is None else scales
    lam_a, lam_m, c_attn = float(nb.lam_attn), float(nb.lam_mlp), float(nb.c_attn)
    d = nb.weight_attn.shape[0]
    ga = nb.weight_attn.detach().numpy()
    gm = nb.weight_mlp.detach().numpy()
    site_a = bhyt_site_registers(lam_a, nb.kappa, ga, d, s_in=s_h, s_stat=s_h, s_out=s_x, eps=nb.eps)
    site_m = bhyt_site_registers(lam_m, nb.kappa, gm, d, s_in=s_mid, s_stat=s_h, s_out=s_mlp, c_attn=c_attn,
                                 lam_attn=lam_a, eps=nb.eps)

    entry = {"lam_attn": lam_a, "lam_mlp": lam_m, "kappa": float(nb.kappa), "c_attn": c_attn,
             "seq_len": int(nb.seq_len), "site_a": site_a.scalars() | {"s_out": site_a.s_out},
             "site_m": site_m.scalars() | {"s_out": site_m.s_out}}
    return entry, (site_a.gamma, site_m.gamma)


__all__ = ["SWIFTMAX_INITS", "bhyt_registers", "bhyt_scales", "calibration_rows", "swiftmax_beta_gamma"]
