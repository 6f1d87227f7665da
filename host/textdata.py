"""Text for every command: the one reader of sentence files (:func:`read_sentences`) and real English text that
ships with CPython (no download): ``pydoc_data.topics``."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vckattn.golden.errors import InputError

#: a tokenizer that maps more than this share of the words of ordinary English text to its unknown token is not
#: the model's tokenizer (e.g. a ``save_pretrained`` folder without tokenizer files: transformers then builds an
#: empty vocabulary and every word becomes ``[UNK]``); MiniLM's maps 0 % of :func:`real_sentences` to ``[UNK]``
MAX_UNKNOWN_SHARE = 0.5

#: ``vckattn eval`` scores held-out sentences from this topic on (at most :data:`EVAL_MAX_SENTENCES` of them); the
#: tuning pool of ``vckattn calibrate --data pydoc`` leaves exactly those out (:func:`tuning_pool`)
EVAL_START_TOPIC = 60
EVAL_MAX_SENTENCES = 256


def read_sentences(path: Path, what: str = "text file") -> list[str]:
    """The non-blank lines of a UTF-8 text file, stripped; InputError (status 4) if it is missing, a folder,
    unreadable, not UTF-8 or without a sentence."""
    lines = [ln.strip() for ln in read_text(path, what).splitlines()]
    lines = [ln for ln in lines if ln]
    if not lines:
        raise InputError(f"{what} {path} has no sentences (empty or only blank lines)")
    return lines


def read_text(path: Path, what: str = "text file") -> str:
    """A UTF-8 text file's content; InputError (status 4) if it is missing, a folder, unreadable or not UTF-8."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{what} {path} does not exist")
    if path.is_dir():
        raise InputError(f"{what} {path} is a folder, not a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None


def eval_sentences(n: int) -> list[str]:
    """The first ``n`` (at most :data:`EVAL_MAX_SENTENCES`) held-out evaluation sentences."""
    if not 1 <= n <= EVAL_MAX_SENTENCES:
        raise ValueError(f"the evaluation set has {EVAL_MAX_SENTENCES} sentences; asked for {n}")
    return real_sentences(n, start_topic=EVAL_START_TOPIC)


def tuning_pool(n: int = 4000) -> list[str]:
    """Up to ``n`` sentences for tuning (``calibrate --data pydoc``), none of them an evaluation sentence."""
    held = set(real_sentences(EVAL_MAX_SENTENCES, start_topic=EVAL_START_TOPIC))
    return [s for s in real_sentences(n) if s not in held]


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


def long_texts(tokenizer: object, n: int, seq_len: int, start_topic: int = 0,
               sentences: Iterable[str] | None = None) -> list[str]:
    """Up to ``n`` texts of at least ``seq_len`` tokens (``tokenizer``'s count, special tokens included), each made
    of consecutive sentences joined by spaces: of ``sentences``, or of :func:`real_sentences` from ``start_topic``
    (deterministic; fewer texts when the sentences run out). Real text for long-sequence measurements."""
    out: list[str] = []
    cur: list[str] = []
    for s in (real_sentences(100_000, start_topic=start_topic) if sentences is None else sentences):
        cur.append(s)
        if len(tokenizer(" ".join(cur), verbose=False)["input_ids"]) >= seq_len:  # type: ignore[operator]
            out.append(" ".join(cur))
            cur = []
            if len(out) == n:
                break
    return out
def unknown_share(tok: Any, sentences: list[str]) -> float | None:
    """The share of the (non-special) tokens of ``sentences`` that ``tok`` maps to its unknown token; None for a
    tokenizer without one (byte-level BPE, e.g. Llama's, can spell every word)."""
    unk = getattr(tok, "unk_token_id", None)
    if unk is None:
        return None
    special = set(getattr(tok, "all_special_ids", []) or []) - {unk}
    ids = [i for s in sentences for i in tok(s, add_special_tokens=False, truncation=False)["input_ids"]
           if i not in special]
    return sum(i == unk for i in ids) / len(ids) if ids else None


def check_tokenizer(tok: Any, where: object, sentences: list[str] | None = None) -> None:
    """InputError (status 4) when ``tok`` maps most of the words of ``sentences`` (default: 32 sentences of
    ordinary English, :func:`real_sentences`) to its unknown token: not a usable tokenizer for a text model."""
    from vckattn.golden.errors import InputError

    share = unknown_share(tok, sentences or real_sentences(32))
    if share is not None and share > MAX_UNKNOWN_SHARE:
        vocab = len(tok) if hasattr(tok, "__len__") else "?"
        raise InputError(f"{where}: the tokenizer maps {share:.0%} of the words of ordinary English text to "
                         f"{tok.unk_token} (vocabulary of {vocab} tokens): the folder has no usable tokenizer files "
                         "(vocab.txt / tokenizer.json); copy those of the model it was trained from into it")
