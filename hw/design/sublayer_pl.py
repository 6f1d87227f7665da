"""The device side of a full-size sublayer build in its manifest: every PL kernel (the three list movers, the PL top,
the normalizer channels, the R writers), every stream link between them and the AIE graph's PLIOs, and the graph's
kernels and PLIOs, so that ``system.cfg`` (:mod:`.system_cfg`), the Vitis flow and the host read one declaration.

The PL top is :class:`vckattn.hw.pl.sublayer_top.SublayerTop` for the build's split (:mod:`.pl_top`); its ports
pair with the graph's PLIOs (:mod:`.gemm_graph`, :mod:`.render`) in the orders both take from the model:

* ``m_axis_xr<g·k + j>`` -> ``qkv_x<g>_<j>`` (broadcast group ``g``, K-slice ``j`` of ``k``); ``m_axis_ax<…>`` ->
  ``o_x<g>_<j>`` likewise;
* ``m_axis_w<i>`` -> ``qkv_w<i>``, then ``o_w<i - (Q/K/V w PLIOs)>``;
* ``qkv_out<i>`` -> ``s_axis_qkv<i>``; ``p<n>_o_out`` -> ``s_axis_a<n>``; ``o_out<i>`` -> ``s_axis_y<i>``;
* ``m_axis_qkv<3n>``, ``<3n + 1>``, ``<3n + 2>`` -> ``p<n>_q_in``, ``p<n>_k_in``, ``p<n>_v_in``;
* ``m_axis_r<i>`` -> the R writer ``s2mm_records_<i>``; the movers ``mm2s_list_x``, ``mm2s_list_w`` and
  ``mm2s_list_desc`` -> ``s_axis_x``, ``s_axis_w``, ``s_axis_desc``;
* the score channels through the engine's PL top (``engine_pl``), as in an engine build.
"""

from __future__ import annotations

from typing import Any

from vckattn.hw.design.pl_top import TopError, TopPlan

__all__ = ["MOVERS", "SUBLAYER_PL", "device_sections", "top_registers"]

#: the sublayer PL top's kernel name
SUBLAYER_PL = "sublayer_pl"
#: the list movers' compute units, by the stream each sends
MOVERS = {"x": "mm2s_list_x", "w": "mm2s_list_w", "desc": "mm2s_list_desc"}


def top_registers(params: Any) -> list[dict]:
    """The register space of the top of ``params`` (:class:`vckattn.hw.pl.sublayer_top.TopParams`) as one list
    (manifest ``registers``): the status window's registers, then each unit's window's (residual units, a decoder's
    RoPE and site units), offset to its window and named ``<window>_<name>`` (``r0_x_mult``, ``rope1_pos_base``,
    ``site0_gamma``)."""
    from vckattn.hw.design.manifest import describe_registers
    from vckattn.hw.pl.sublayer_top import top_regmaps

    wins, sub = top_regmaps(params)
    out = describe_registers(wins[0][1])
    for w, (name, rm) in enumerate(wins[1:], start=1):
        out += [{**e, "name": f"{name}_{e['name']}", "offset": (w << sub) + int(e["offset"])}
                for e in describe_registers(rm)]
    return out


def _axis(name: str, direction: str) -> dict:
    return {"name": name, "protocol": "axis", "direction": direction, "tdata_bits": 128}


def device_sections(b: Any, engine: dict, plan: TopPlan) -> dict[str, Any]:
    """The manifest sections of full-size build ``b`` that describe its device: ``kernels``, ``connectivity``,
    ``graph`` (its kernels and PLIOs: the attention pipelines' and the projection cascades'), and ``pl_top`` (what
    the PL top is made of), given the engine's manifest ``engine`` of its attention pipelines
    (:func:`.render.engine_manifest`) and its PL top ``plan`` (:func:`.sublayer_build.build_top_plan`).
    :class:`.pl_top.TopError` where the top's streams are not the graph's PLIOs."""
    from vckattn.golden.sublayer import SUBLAYER_TOP_ID
    from vckattn.hw.design.render import PL_TOP
    from vckattn.hw.pl.sublayer_top import top_regmaps, top_streams

    p = plan.params
    n = p.readers
    _, _, gp = b.place()
    stages = {st.name: st for st in gp.stages}
    qkv_st, o_st = stages["qkv"], stages["o"]
    pipes = int(engine["engine"]["pipelines"])
    m = int(engine["engine"]["score_plios"])
    if len(qkv_st.plios()) != len(qkv_st.x_groups) * qkv_st.params.kernels + len(qkv_st.w_groups) + \
            len(qkv_st.out_groups):
        raise TopError(f"{b.name}: the Q/K/V stage's PLIOs are not its groups'")
    if (len(qkv_st.x_groups) * qkv_st.params.kernels, len(o_st.x_groups) * o_st.params.kernels) != (n["x"], n["a"]):
        raise TopError(f"{b.name}: the top's x readers ({n['x']}, {n['a']}) are not the graph's x PLIOs")
    if len(qkv_st.w_groups) + len(o_st.w_groups) != p.w_streams or len(o_st.out_groups) != n["residual"] or \
            len(qkv_st.out_groups) != len(p.qkv_write_banks) or n["qkv"] != 3 * pipes:
        raise TopError(f"{b.name}: the top's streams are not the graph's PLIOs")

    links = [(f"{MOVERS[s]}.out", f"{SUBLAYER_PL}.s_axis_{s}") for s in ("x", "w", "desc")]
    k = qkv_st.params.kernels
    links += [(f"{SUBLAYER_PL}.m_axis_xr{g * k + j}", f"ai_engine_0.qkv_x{g}_{j}")
              for g in range(len(qkv_st.x_groups)) for j in range(k)]
    n_qw = len(qkv_st.w_groups)
    links += [(f"{SUBLAYER_PL}.m_axis_w{i}", f"ai_engine_0.qkv_w{i}") for i in range(n_qw)]
    links += [(f"{SUBLAYER_PL}.m_axis_w{n_qw + i}", f"ai_engine_0.o_w{i}") for i in range(len(o_st.w_groups))]
    links += [(f"ai_engine_0.qkv_out{i}", f"{SUBLAYER_PL}.s_axis_qkv{i}") for i in range(len(qkv_st.out_groups))]
    for i in range(pipes):
        links += [(f"{SUBLAYER_PL}.m_axis_qkv{3 * i + c}", f"ai_engine_0.p{i}_{s}_in") for c, s in enumerate("qkv")]
        links += [(f"ai_engine_0.p{i}_o_out", f"{SUBLAYER_PL}.s_axis_a{i}")]
        for c in range(m):
            links += [(f"ai_engine_0.p{i}_s_out{c}", f"{PL_TOP}.s{i * m + c}"),
                      (f"{PL_TOP}.p{i * m + c}", f"ai_engine_0.p{i}_p_in{c}")]
    ko = o_st.params.kernels
    links += [(f"{SUBLAYER_PL}.m_axis_ax{g * ko + j}", f"ai_engine_0.o_x{g}_{j}")
              for g in range(len(o_st.x_groups)) for j in range(ko)]
    links += [(f"ai_engine_0.o_out{i}", f"{SUBLAYER_PL}.s_axis_y{i}") for i in range(n["residual"])]
    links += [(f"{SUBLAYER_PL}.m_axis_r{i}", f"s2mm_records_{i}.r_in") for i in range(n["residual"])]

    names = [name for name, _ in p.buffers]
    buffers = ", ".join(names[:-1]) + " and " + names[-1]
    units = (f", {p.rope_units} RoPE units on the Q/K/V records and {n['site']} BHyT site A units from X to U"
             if p.decoder else "")
    wins, window_bits = top_regmaps(p)
    top_ports = [_axis(name, d) for name, d in top_streams(p)]
    top_ports.append({"name": "s_axil", "protocol": "axi4lite", "direction": "in"})
    normalizer = next(kk for kk in engine["kernels"] if kk["name"] == PL_TOP)
    kernels = [
        {"name": "mm2s_list", "kind": "hls", "compute_units": list(MOVERS.values()),
         "doc": "the list mover (hw/hls/mm2s_list.cpp), three instances: the X mover (X of every sequence to the PL "
                "top's X buffer), the weight mover (ROUTE packets of weight blocks to the w router) and the "
                "descriptor mover (every buffer reader's descriptors, routed, sequence by sequence); per command its "
                "header beat unless no_header, then its run of src",
         "ports": [{"name": "cmds", "protocol": "m_axi"}, {"name": "n_cmds", "protocol": "scalar"},
                   {"name": "src", "protocol": "m_axi"}, {"name": "src_beats", "protocol": "scalar"},
                   _axis("out", "out")],
         "registers": []},
        {"name": SUBLAYER_PL, "kind": "rtl", "id": SUBLAYER_TOP_ID,
         "doc": f"the sublayer's PL top (hw/pl/sublayer_top.py): the {buffers} buffers with their writers and "
                f"readers, {n['residual']} residual paths{units}, the descriptor router ({sum(n.values())} readers) "
                f"and the w router ({p.w_streams} w streams); status registers in window 0 of s_axil, then a window "
                f"a unit (sublayer.pl_top.windows)",
         "ports": top_ports, "registers": top_registers(p)},
        normalizer,
        {"name": "s2mm_records", "kind": "hls", "compute_units": [f"s2mm_records_{i}" for i in range(n["residual"])],
         "doc": "the R writer (hw/hls/s2mm_records.cpp), one a W_O output PLIO: each R record's valid rows into R "
                "(tokens x d_model int8) by tile id; a record it cannot place refused with a status",
         "ports": [_axis("r_in", "in"), {"name": "r_out", "protocol": "m_axi"},
                   *({"name": s, "protocol": "scalar"} for s in ("n_records", "tile_rows", "cols", "row_tiles",
                                                                 "d_model", "n_tokens"))],
         "registers": []},
    ]
    graph = dict(engine["graph"])
    graph["kernels"] = [*graph["kernels"], *(kk for st in gp.stages for kk in st.kernels())]
    graph["plios"] = [*graph["plios"], *({"name": x, "direction": d, "bits": 128}
                                         for st in gp.stages for x, d, _, _ in st.plios())]
    return {"kernels": kernels, "connectivity": [{"from": a, "to": bb} for a, bb in links], "graph": graph,
            "pl_top": {"kernel": SUBLAYER_PL, "readers": n, "residual_paths": n["residual"],
                       "w_streams": p.w_streams, "descriptor_fifos": list(p.desc_depths),
                       "windows": [name for name, _ in wins], "register_window_bits": window_bits}}
