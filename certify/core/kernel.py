"""The ``Kernel`` value: ``alpha`` on a token set, in factor or matrix form, with provenance.

* Factor form: ``alpha(x, z) = <phiQ(x), phiK(z)>`` given by the feature
  matrices ``PhiQ, PhiK (K, r)`` that a model computes (stored, or computed in
  batches from a feature function: the whole cube ``{0,1}^m`` up to m = 24
  without ever forming a ``K x K`` matrix).
* Matrix form: a ``K1 x K2`` matrix of floats (exact dyadics) or of exact
  rationals.

The kernel of a model is the exact product of the float feature matrices it
computes; floats are converted losslessly (``solvers.exact.dyadic``).

Reading a kernel from a file or a model is :mod:`certify.sources`; this
module is the value and its constructors (numpy only).

Token sets: ``cube:M`` (little-endian order of ``certify.core.cube``), a family
(name or file, its tokens), or the tokens stored with the kernel.
"""

from __future__ import annotations

import enum
import io
import json
import os
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence, overload

import numpy as np

from certify.checkers.binding import token_list_sha256
from certify.core.errors import InputError
from certify.core.files import atomic_write_bytes, atomic_write_text
from certify.core.limits import check_matrix_shape, limit
from certify.core.numbers import check_matrix, exact_dtype_problem, q_to_str, str_to_q

KERNEL_FORMAT = "certify-attention/kernel/1"
MAX_SAVE_BYTES = 1 << 31
#: largest dense float64 matrix ``Kernel.matrix`` forms from a factor-form kernel's features
MAX_DENSE_BYTES = 1 << 28
MAX_CUBE_M = 24

FeatureFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]   # tokens (B, m) uint8 -> (B, r) x 2


class Form(str, enum.Enum):
    FACTOR = "factor"
    MATRIX = "matrix"


@dataclass(frozen=True)
class Provenance:
    source: str                        # path or description
    source_sha256: str | None          # sha256 of the source file (None: built in memory)
    adapter: str                       # how it was read: kernel-file, matrix-file, checkpoint, performer, ...
    dtype: str                         # float32 / float64 / int64 / rational
    conversion: str = "exact: each float is m 2^e (dyadic), converted losslessly"
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "source_sha256": self.source_sha256, "adapter": self.adapter,
                "dtype": self.dtype, "conversion": self.conversion, "details": dict(self.details)}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Provenance":
        extra = set(obj) - {"source", "source_sha256", "adapter", "dtype", "conversion", "details"}
        if extra:
            raise InputError(f"kernel provenance has unknown keys: {sorted(extra)}")
        try:
            return cls(source=str(obj["source"]), source_sha256=obj.get("source_sha256"),
                       adapter=str(obj["adapter"]), dtype=str(obj["dtype"]),
                       conversion=str(obj.get("conversion", "")), details=dict(obj.get("details", {})))
        except KeyError as exc:
            raise InputError(f"kernel provenance lacks {exc}") from None


@dataclass(frozen=True, eq=False)
class Kernel:
    form: Form
    provenance: Provenance
    token_set: str                       # "cube:M", "family:NAME", "tokens", "index"
    num_tokens: int                      # K (rows) ; matrix form: rows
    m: int | None = None                 # token dimension (None: abstract index set)
    tokens: np.ndarray | None = None     # (K, m) uint8, None for the lazy cube / index sets
    rank: int | None = None              # feature dimension r (factor form)
    phi_q: np.ndarray | None = None      # (K, r) float, stored features
    phi_k: np.ndarray | None = None
    feature_fn: FeatureFn | None = None  # lazy features (models, adapters)
    stored_matrix: np.ndarray | None = None   # (K1, K2) float or int: a matrix-form kernel's own array
    rational: tuple[tuple[Fraction, ...], ...] | None = None   # exact rational matrix
    guarantee: str | None = None         # features_nonnegative / kernel_nonnegative / signed

    # ---------------------------------------------------------- shape and access
    @property
    def matrix(self) -> np.ndarray | None:
        """The kernel matrix as an array, for people and notebooks: a matrix-form
        kernel's stored array (None for an exact rational one: see ``rational``);
        for a factor-form kernel, ``PhiQ PhiK^T`` computed in float64 on first
        access and kept (a float product, rounded: the certificates use the exact
        product of the features; at most ``MAX_DENSE_BYTES``, else InputError)."""
        if self.form is not Form.FACTOR:
            return self.stored_matrix
        cached = self.__dict__.get("_dense")
        if cached is None:
            need = self.num_tokens * self.num_tokens * 8
            if need > MAX_DENSE_BYTES:
                raise InputError(f"the {self.num_tokens} x {self.num_tokens} kernel matrix needs ~{need >> 20} MiB "
                                 f"(limit {MAX_DENSE_BYTES >> 20} MiB); read its features with "
                                 "feature_batches() instead")
            qs, ks = zip(*self.feature_batches())
            q, k = np.concatenate(qs).astype(np.float64), np.concatenate(ks).astype(np.float64)
            cached = q @ k.T
            cached.setflags(write=False)
            object.__setattr__(self, "_dense", cached)
        return cached

    @property
    def shape(self) -> tuple[int, int]:
        if self.form is Form.FACTOR:
            return self.num_tokens, self.num_tokens
        if self.stored_matrix is not None:
            return (int(self.stored_matrix.shape[0]), int(self.stored_matrix.shape[1]))
        assert self.rational is not None
        return len(self.rational), len(self.rational[0])

    @property
    def dtype(self) -> str:
        return self.provenance.dtype

    @property
    def feature_rank(self) -> int:
        """The feature dimension ``r`` of a factor-form kernel (ValueError for a
        kernel that names none)."""
        if self.rank is None:
            raise ValueError("this kernel names no feature dimension (not a factor-form kernel)")
        return int(self.rank)

    def token_strings(self) -> list[str] | None:
        """The tokens as bit strings in row order (None for the lazy cube and index sets)."""
        if self.tokens is None:
            return None
        return ["".join(map(str, row)) for row in self.tokens.tolist()]

    @property
    def tokens_sha256(self) -> str | None:
        """The canonical hash of the token list (what a sentence names an explicit
        token set by; :func:`certify.checkers.binding.token_list_sha256`)."""
        toks = self.token_strings()
        return None if toks is None else token_list_sha256(toks)

    def token_batch(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``start:stop`` as ``(B, m)`` uint8 (computed for the cube)."""
        if self.tokens is not None:
            return self.tokens[start:stop]
        if self.token_set.startswith("cube:"):
            idx = np.arange(start, stop, dtype=np.int64)
            return ((idx[:, None] >> np.arange(self.m or 0)) & 1).astype(np.uint8)
        raise InputError("this kernel has no token coordinates")

    def feature_batches(self, batch_size: int = 1 << 14) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(PhiQ_b, PhiK_b)`` over consecutive token batches (factor form)."""
        if self.form is not Form.FACTOR:
            raise ValueError("feature batches need a factor-form kernel")
        for s in range(0, self.num_tokens, batch_size):
            e = min(s + batch_size, self.num_tokens)
            if self.phi_q is not None and self.phi_k is not None:
                yield self.phi_q[s:e], self.phi_k[s:e]
            else:
                yield self.features_at(self.token_batch(s, e))

    def features_at(self, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(PhiQ, PhiK)`` at arbitrary tokens ``(B, m)``: the feature function, or
        the stored rows of those tokens."""
        tokens = np.asarray(tokens, dtype=np.uint8)
        if self.feature_fn is not None:
            q, k = self.feature_fn(tokens)
            return _features(q, "PhiQ"), _features(k, "PhiK")
        if self.phi_q is None or self.phi_k is None:
            raise ValueError("features_at needs a factor-form kernel")
        idx = self.token_rows(tokens)
        return self.phi_q[idx], self.phi_k[idx]

    def token_rows(self, tokens: np.ndarray) -> np.ndarray:
        """Row index of each token in this kernel's token set (``InputError`` if absent)."""
        tokens = np.asarray(tokens, dtype=np.uint8)
        if self.m is None or tokens.shape[-1] != self.m:
            raise InputError(f"tokens of dimension {tokens.shape[-1]} do not match the kernel's m = {self.m}")
        if self.tokens is None and self.token_set.startswith("cube:"):
            return (tokens.astype(np.int64) << np.arange(self.m)).sum(-1)
        if self.tokens is None:
            raise InputError("this kernel has no token coordinates")
        table = {bytes(row): i for i, row in enumerate(self.tokens)}
        out = []
        for row in tokens:
            i = table.get(bytes(row))
            if i is None:
                raise InputError(f"token {''.join(map(str, row))} is not in the kernel's token set")
            out.append(i)
        return np.array(out, dtype=np.int64)

    def materialize(self, max_bytes: int = MAX_SAVE_BYTES) -> "Kernel":
        """The same kernel with stored features (factor form)."""
        if self.form is not Form.FACTOR or self.phi_q is not None:
            return self
        need = 2 * self.num_tokens * int(self.rank or 1) * 8
        if need > max_bytes:
            raise InputError(f"storing {self.num_tokens} x {self.rank} features needs ~{need >> 20} MiB "
                             f"(limit {max_bytes >> 20} MiB); run certify.rank on the source directly")
        qs, ks = zip(*self.feature_batches())
        return replace(self, phi_q=np.concatenate(qs), phi_k=np.concatenate(ks), feature_fn=None)

    # ---------------------------------------------------------- files
    def meta(self) -> dict[str, Any]:
        return {"format": KERNEL_FORMAT, "form": self.form.value, "token_set": self.token_set,
                "num_tokens": self.num_tokens, "m": self.m, "rank": self.rank,
                "guarantee": self.guarantee, "provenance": self.provenance.to_json()}

    def save(self, path: str | os.PathLike) -> None:
        """``.npz`` (arrays + JSON meta) or ``.json`` (exact rationals), atomically."""
        path = Path(path)
        k = self.materialize()
        meta = k.meta()
        if path.suffix == ".json":
            if k.form is Form.FACTOR:
                assert k.phi_q is not None and k.phi_k is not None     # materialized
                meta["phi_q"] = _float_rows_json(k.phi_q)
                meta["phi_k"] = _float_rows_json(k.phi_k)
            else:
                rows: Sequence[Sequence[Fraction]]
                if k.rational is not None:
                    rows = k.rational
                else:
                    assert k.stored_matrix is not None
                    rows = _float_matrix_rationals(k.stored_matrix)
                meta["matrix"] = [[q_to_str(v) for v in row] for row in rows]
            if k.tokens is not None:
                meta["tokens"] = ["".join(map(str, row)) for row in k.tokens.tolist()]
            atomic_write_text(path, json.dumps(meta) + "\n")
            return
        if path.suffix != ".npz":
            raise InputError(f"kernel files are .npz or .json, got {path.name}")
        arrays: dict[str, np.ndarray] = {"kernel_meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
        if k.form is Form.FACTOR:
            assert k.phi_q is not None and k.phi_k is not None         # materialized
            arrays["phi_q"], arrays["phi_k"] = k.phi_q, k.phi_k
        elif k.stored_matrix is not None:
            arrays["matrix"] = k.stored_matrix
        else:
            raise InputError("a rational matrix kernel is saved as .json (exact p/q strings)")
        if k.tokens is not None:
            arrays["tokens"] = k.tokens
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as bool
        atomic_write_bytes(path, buf.getvalue())


def _features(a: Any, what: str) -> np.ndarray:
    if hasattr(a, "detach") and hasattr(a, "numpy"):      # a torch tensor, without importing torch
        a = a.detach().cpu().numpy()
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype.kind != "f":
        raise InputError(f"{what}: expected a 2-D float array, got {a.dtype} {a.shape}")
    if (why := exact_dtype_problem(a.dtype)) is not None:      # float16/32/64 only (no longdouble)
        raise InputError(f"{what}: {why}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what}: features contain NaN or Inf")
    return a


def _float_rows_json(a: np.ndarray) -> list[list[str]]:
    return [[q_to_str(Fraction(float(v))) for v in row] for row in np.asarray(a, dtype=np.float64)]


def _float_matrix_rationals(a: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(v)) if a.dtype.kind == "f" else Fraction(int(v)) for v in row] for row in a]


# ---------------------------------------------------------------- construction helpers

@overload
def parse_tokens(spec: str) -> tuple[str, int, np.ndarray | None]: ...
@overload
def parse_tokens(spec: None) -> None: ...
def parse_tokens(spec: str | None) -> tuple[str, int, np.ndarray | None] | None:
    """``cube:M`` -> ("cube:M", M, None); a family name/file -> ("family:NAME", m, tokens)."""
    if spec is None:
        return None
    if spec.startswith("cube:"):
        try:
            m = int(spec[5:]) if len(spec) < 20 else -1
        except ValueError:
            raise InputError(f"bad token set {spec!r}: expected cube:M") from None
        if not 1 <= m <= limit("cube_m"):
            raise InputError(f"cube dimension must be 1..{limit('cube_m')} (limit cube_m; raise it "
                             f"with CERTIFY_LIMIT_CUBE_M), got {spec[5:][:30]}")
        return f"cube:{m}", m, None
    from certify.core.families import load_family
    fam = load_family(spec)
    return f"family:{fam.name}", int(fam.tokens.shape[1]), np.asarray(fam.tokens, dtype=np.uint8)


def from_feature_fn(fn: FeatureFn, tokens_spec: str, provenance: Provenance, *, rank: int,
                    guarantee: str | None = None) -> Kernel:
    """Factor-form kernel of a feature function on ``cube:M`` or a family."""
    token_set, m, toks = parse_tokens(tokens_spec)
    K = (1 << m) if toks is None else len(toks)
    return Kernel(form=Form.FACTOR, provenance=provenance, token_set=token_set, num_tokens=K, m=m,
                  tokens=toks, rank=int(rank), feature_fn=fn, guarantee=guarantee)


def from_features(phi_q: Any, phi_k: Any, provenance: Provenance, *, tokens: Any = None, token_set: str | None = None,
                  guarantee: str | None = None) -> Kernel:
    q, k = _features(phi_q, "PhiQ"), _features(phi_k, "PhiK")
    if q.ndim == 2 and q.shape[1] > limit("rank"):
        raise InputError(f"features have {q.shape[1]} columns, over the limit rank = {limit('rank')}")
    if q.shape != k.shape or q.shape[0] == 0 or q.shape[1] == 0:
        raise InputError(f"PhiQ {q.shape} and PhiK {k.shape} must have one non-empty shape (K, r)")
    m = None
    if tokens is not None:
        tokens = np.asarray(tokens, dtype=np.uint8)
        if tokens.ndim != 2 or len(tokens) != len(q):
            raise InputError(f"tokens {tokens.shape} do not match the {len(q)} feature rows")
        m = tokens.shape[1]
    elif token_set and token_set.startswith("cube:"):
        m = int(token_set[5:])
        if len(q) != 1 << m:
            raise InputError(f"{token_set} has {1 << m} tokens, the features have {len(q)} rows")
    return Kernel(form=Form.FACTOR, provenance=provenance,
                  token_set=token_set or ("tokens" if tokens is not None else "index"),
                  num_tokens=len(q), m=m, tokens=tokens, rank=q.shape[1], phi_q=q, phi_k=k,
                  guarantee=guarantee)


def from_matrix(a: Any, provenance: Provenance, *, tokens: Any = None, token_set: str | None = None) -> Kernel:
    shape = getattr(a, "shape", None)
    if shape is not None and len(shape) == 2:
        check_matrix_shape(int(shape[0]), int(shape[1]))
    a = check_matrix(a, "kernel matrix")
    m = None
    if token_set and token_set.startswith("cube:"):
        m = int(token_set[5:])
        if a.shape != (1 << m, 1 << m):
            raise InputError(f"{token_set} needs a {1 << m} x {1 << m} matrix, got {a.shape}")
    if tokens is not None:
        tokens = np.asarray(tokens, dtype=np.uint8)
        if a.shape[0] != a.shape[1] or len(tokens) != a.shape[0]:
            raise InputError(f"tokens {tokens.shape} do not match the matrix {a.shape}")
        m = tokens.shape[1]
    return Kernel(form=Form.MATRIX, provenance=provenance,
                  token_set=token_set or ("tokens" if tokens is not None else "index"),
                  num_tokens=a.shape[0], m=m, tokens=tokens, stored_matrix=a)


def from_rationals(rows: Any, provenance: Provenance, *, tokens: Any = None, token_set: str | None = None) -> Kernel:
    if not isinstance(rows, (list, tuple)) or not rows or not all(isinstance(r, (list, tuple)) for r in rows):
        raise InputError("kernel matrix: expected a non-empty list of rows")
    n2 = len(rows[0])
    if n2 == 0 or any(len(r) != n2 for r in rows):
        raise InputError("kernel matrix: ragged or empty rows")
    check_matrix_shape(len(rows), n2)
    q = tuple(tuple(v if isinstance(v, Fraction) else str_to_q(v) for v in r) for r in rows)
    m = None
    if tokens is not None:
        tokens = np.asarray(tokens, dtype=np.uint8)
        m = tokens.shape[1]
    elif token_set and token_set.startswith("cube:"):
        m = int(token_set[5:])
    return Kernel(form=Form.MATRIX, provenance=provenance,
                  token_set=token_set or ("tokens" if tokens is not None else "index"),
                  num_tokens=len(q), m=m, tokens=tokens, rational=q)
