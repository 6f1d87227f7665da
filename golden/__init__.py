"""Golden models: the numerical source of truth of vckattn.

Float (PyTorch) reference models, one module per concern:

* :mod:`.normalizers` — softmax, online softmax, Softermax, SwiftMax/ConSmax;
* :mod:`.norms` — LayerNorm, RMSNorm, DyT, LNS, Peri-LN;
* :mod:`.bhyt` — BHyT (exact and approximate-variance block form);
* :mod:`.attention` — multi-head attention with a pluggable normalizer, RoPE;
* :mod:`.blocks` — BERT encoder layer, Llama decoder block, ViT block;
* :mod:`.convert` — in-place conversion of Hugging Face models.

Nothing here imports from ``vckattn.host``, ``vckattn.hw`` or ``vckattn.sim``.
"""
