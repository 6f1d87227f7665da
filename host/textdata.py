"""Real English text that ships with CPython (no download): ``pydoc_data.topics``."""

from __future__ import annotations

import re


def real_sentences(n: int = 8, start_topic: int = 0, min_chars: int = 40, max_chars: int = 200) -> list[str]:
    """Up to ``n`` sentences of ``min_chars``..``max_chars`` characters from the Python
    reference-manual text in ``pydoc_data.topics`` (topics taken in sorted order from
    ``start_topic``; deterministic)."""
    from pydoc_data.topics import topics

    out: list[str] = []
    for key in sorted(topics)[start_topic:]:
        for s in re.split(r"(?<=[.!?])\s+", topics[key]):
            s = " ".join(s.split())
            if min_chars <= len(s) <= max_chars and not s.startswith(("*", ">>>")):
                out.append(s)
                if len(out) == n:
                    return out
    return out
