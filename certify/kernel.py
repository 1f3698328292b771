"""The ``Kernel`` value: ``alpha`` on a token set, in factor or matrix form, with provenance.

* Factor form: ``alpha(x, z) = <phiQ(x), phiK(z)>`` given by the feature
  matrices ``PhiQ, PhiK (K, r)`` that a model computes (stored, or computed in
  batches from a feature function: the whole cube ``{0,1}^m`` up to m = 24
  without ever forming a ``K x K`` matrix).
* Matrix form: a ``K1 x K2`` matrix of floats (exact dyadics) or of exact
  rationals.

The kernel of a model is the exact product of the float feature matrices it
computes; floats are converted losslessly (``solvers.exact.dyadic``).

Sources (:func:`load_kernel`): a kernel file written by :meth:`Kernel.save`
(``.npz`` or ``.json``); a matrix file (``.npy``, ``.npz`` with ``matrix`` or
``phi_q``/``phi_k``, ``.safetensors`` likewise, ``.csv`` of exact decimals or
``p/q``, ``.json`` with ``"p/q"`` strings); a ``models/`` checkpoint
(``X.json`` + ``X.safetensors``); a third-party checkpoint with an adapter spec
(``models.adapters``). Pickles are never loaded.

Token sets: ``cube:M`` (little-endian order of ``certify.cube``), a family
(name or file, its tokens), or the tokens stored with the kernel.
"""

from __future__ import annotations

import csv
import enum
import io
import json
import os
import zipfile
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import numpy as np

from certify.certificate import atomic_write_bytes, atomic_write_text, q_to_str, sha256_file, str_to_q
from certify.errors import InputError
from certify.limits import check_matrix_shape, limit, parse_exact

KERNEL_FORMAT = "certify-attention/kernel/1"
MAX_SAVE_BYTES = 1 << 31
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
    matrix: np.ndarray | None = None     # (K1, K2) float or int
    rational: tuple[tuple[Fraction, ...], ...] | None = None   # exact rational matrix
    guarantee: str | None = None         # features_nonnegative / kernel_nonnegative / signed

    # ---------------------------------------------------------- shape and access
    @property
    def shape(self) -> tuple[int, int]:
        if self.form is Form.FACTOR:
            return self.num_tokens, self.num_tokens
        if self.matrix is not None:
            return tuple(self.matrix.shape)   # type: ignore[return-value]
        assert self.rational is not None
        return len(self.rational), len(self.rational[0])

    @property
    def dtype(self) -> str:
        return self.provenance.dtype

    def token_batch(self, start: int, stop: int) -> np.ndarray:
        """Tokens ``start:stop`` as ``(B, m)`` uint8 (computed for the cube)."""
        if self.tokens is not None:
            return self.tokens[start:stop]
        if self.token_set.startswith("cube:"):
            idx = np.arange(start, stop, dtype=np.int64)
            return ((idx[:, None] >> np.arange(self.m)) & 1).astype(np.uint8)
        raise InputError("this kernel has no token coordinates")

    def feature_batches(self, batch_size: int = 1 << 14) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``(PhiQ_b, PhiK_b)`` over consecutive token batches (factor form)."""
        if self.form is not Form.FACTOR:
            raise ValueError("feature batches need a factor-form kernel")
        for s in range(0, self.num_tokens, batch_size):
            e = min(s + batch_size, self.num_tokens)
            if self.phi_q is not None:
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
        if self.phi_q is None:
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
                meta["phi_q"] = _float_rows_json(k.phi_q)
                meta["phi_k"] = _float_rows_json(k.phi_k)
            else:
                rows = k.rational if k.rational is not None else _float_matrix_rationals(k.matrix)
                meta["matrix"] = [[q_to_str(v) for v in row] for row in rows]
            if k.tokens is not None:
                meta["tokens"] = ["".join(map(str, row)) for row in k.tokens.tolist()]
            atomic_write_text(path, json.dumps(meta) + "\n")
            return
        if path.suffix != ".npz":
            raise InputError(f"kernel files are .npz or .json, got {path.name}")
        arrays: dict[str, np.ndarray] = {"kernel_meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
        if k.form is Form.FACTOR:
            arrays["phi_q"], arrays["phi_k"] = k.phi_q, k.phi_k
        elif k.matrix is not None:
            arrays["matrix"] = k.matrix
        else:
            raise InputError("a rational matrix kernel is saved as .json (exact p/q strings)")
        if k.tokens is not None:
            arrays["tokens"] = k.tokens
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        atomic_write_bytes(path, buf.getvalue())


def _features(a, what: str) -> np.ndarray:
    try:
        import torch
        if isinstance(a, torch.Tensor):
            a = a.detach().cpu().numpy()
    except ImportError:       # pragma: no cover
        pass
    a = np.asarray(a)
    if a.ndim != 2 or a.dtype.kind != "f":
        raise InputError(f"{what}: expected a 2-D float array, got {a.dtype} {a.shape}")
    if not np.all(np.isfinite(a)):
        raise InputError(f"{what}: features contain NaN or Inf")
    return a


def _float_rows_json(a: np.ndarray) -> list[list[str]]:
    return [[q_to_str(Fraction(float(v))) for v in row] for row in np.asarray(a, dtype=np.float64)]


def _float_matrix_rationals(a: np.ndarray) -> list[list[Fraction]]:
    return [[Fraction(float(v)) if a.dtype.kind == "f" else Fraction(int(v)) for v in row] for row in a]


# ---------------------------------------------------------------- construction helpers

def parse_tokens(spec: str | None):
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
    from certify.families import load_family
    fam = load_family(spec)
    return f"family:{fam.name}", int(fam.tokens.shape[1]), np.asarray(fam.tokens, dtype=np.uint8)


def from_feature_fn(fn: FeatureFn, tokens_spec: str, provenance: Provenance, *, rank: int,
                    guarantee: str | None = None) -> Kernel:
    """Factor-form kernel of a feature function on ``cube:M`` or a family."""
    token_set, m, toks = parse_tokens(tokens_spec)
    K = (1 << m) if toks is None else len(toks)
    return Kernel(form=Form.FACTOR, provenance=provenance, token_set=token_set, num_tokens=K, m=m,
                  tokens=toks, rank=int(rank), feature_fn=fn, guarantee=guarantee)


def from_features(phi_q, phi_k, provenance: Provenance, *, tokens=None, token_set: str | None = None,
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


def from_matrix(a, provenance: Provenance, *, tokens=None, token_set: str | None = None) -> Kernel:
    from solvers.exact import check_matrix
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
                  num_tokens=a.shape[0], m=m, tokens=tokens, matrix=a)


def from_rationals(rows, provenance: Provenance, *, tokens=None, token_set: str | None = None) -> Kernel:
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


# ---------------------------------------------------------------- sources

def load_kernel(source: str | os.PathLike, *, tokens: str | None = None, spec: str | None = None) -> Kernel:
    """Read any supported source (see the module docstring) as a :class:`Kernel`."""
    path = Path(source)
    if spec is not None:
        from models.adapters import load_adapter_kernel
        return load_adapter_kernel(path, spec, tokens=tokens)
    if not path.exists():
        raise InputError(f"no such file: {source}")
    if _is_checkpoint(path):
        return _from_checkpoint(path, tokens)
    if path.is_dir():
        raise InputError(f"{source} is a directory, not a kernel file or checkpoint")
    suffix = path.suffix.lower()
    if not path.is_file():
        raise InputError(f"{source} is not a regular file")
    if suffix == ".npy":
        _np_header_check(path)
    digest = sha256_file(path)
    prov = lambda dtype, adapter="matrix-file", **d: Provenance(str(path), digest, adapter, dtype, details=d)  # noqa: E731
    if suffix == ".npy":
        arr = _np_load(path)
        return _with_tokens(from_matrix(arr, prov(arr.dtype.name)), tokens)
    if suffix == ".npz":
        return _from_arrays(_npz_arrays(path), path, digest, tokens)
    if suffix == ".safetensors":
        return _from_arrays(_safetensors_arrays(path), path, digest, tokens)
    if suffix == ".csv":
        return _with_tokens(from_rationals(_csv_rows(path), prov("rational")), tokens)
    if suffix == ".json":
        obj = _json(path)
        if isinstance(obj, dict) and obj.get("format") == KERNEL_FORMAT:
            return _from_kernel_json(obj, path, digest)
        rows = obj.get("matrix") if isinstance(obj, dict) else obj
        if isinstance(obj, dict) and set(obj) - {"matrix", "tokens"}:
            raise InputError(f"{path.name}: unknown keys {sorted(set(obj) - {'matrix', 'tokens'})}")
        toks = _token_strings(obj.get("tokens")) if isinstance(obj, dict) and obj.get("tokens") else None
        k = from_rationals(_json_rows(rows, path.name), prov("rational"), tokens=toks)
        return _with_tokens(k, tokens) if toks is None else k
    if suffix in (".pt", ".pth", ".bin", ".pkl", ".pickle", ".ckpt"):
        raise InputError(f"{path.name}: kernel matrices are read from .npy/.npz/.safetensors/.csv/.json; "
                         f"a torch state dict needs --spec (read with weights_only=True), pickles never; "
                         f"`certify checkpoint {path}` detects known layouts")
    raise InputError(f"{path.name}: unknown kernel source type {suffix or '(no suffix)'}")


def _with_tokens(k: Kernel, tokens: str | None) -> Kernel:
    """Attach a token set to a matrix/feature kernel read from a file."""
    if tokens is None:
        return k
    token_set, m, toks = parse_tokens(tokens)
    n = (1 << m) if toks is None else len(toks)
    if k.num_tokens != n or (k.form is Form.MATRIX and k.shape[1] != n):
        raise InputError(f"token set {token_set} has {n} tokens; the kernel is {k.shape[0]} x {k.shape[1]}")
    return replace(k, token_set=token_set, m=m, tokens=toks)


def _np_load(path: Path) -> np.ndarray:
    _np_header_check(path)
    try:
        a = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InputError(f"{path.name} holds pickled objects; refusing to unpickle") from None
        raise InputError(f"{path.name} is not a readable .npy file ({exc})") from None
    except (OSError, EOFError) as exc:
        raise InputError(f"{path.name} is not a readable .npy file ({exc})") from None
    if isinstance(a, np.lib.npyio.NpzFile):     # a zip renamed .npy
        raise InputError(f"{path.name} is an .npz archive, not .npy")
    return a


def _np_header_check(path: Path) -> None:
    try:                        # the header first: a huge matrix is refused before it is read
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                else np.lib.format.read_array_header_2_0
            shape = read(f)[0]
        if len(shape) == 2:
            check_matrix_shape(int(shape[0]), int(shape[1]), f"{path.name}: the matrix")
        elif any(int(d) > limit("matrix_n") ** 2 for d in shape):
            raise InputError(f"{path.name}: array of shape {shape} is over the limit matrix_n")
    except InputError:
        raise
    except Exception:           # not a plain .npy header: np.load says what is wrong
        pass


def _npz_arrays(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except ValueError as exc:
        if "pickle" in str(exc).lower():
            raise InputError(f"{path.name} holds pickled objects; refusing to unpickle") from None
        raise InputError(f"{path.name} is not a readable .npz file ({exc})") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise InputError(f"{path.name} is not a readable .npz file ({type(exc).__name__})") from None


def _safetensors_arrays(path: Path) -> dict[str, np.ndarray]:
    try:
        from safetensors.numpy import load_file
        return dict(load_file(str(path)))
    except Exception as exc:   # safetensors raises its own error types for corrupt headers
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{path.name} is not a readable safetensors file ({first})") from None


def _from_arrays(arrays: dict[str, np.ndarray], path: Path, digest: str, tokens: str | None) -> Kernel:
    if "kernel_meta" in arrays:
        try:
            meta = json.loads(bytes(arrays["kernel_meta"].astype(np.uint8)).decode())
        except (ValueError, RecursionError):
            raise InputError(f"{path.name}: corrupt kernel metadata") from None
        return _from_kernel_meta(meta, arrays, path, digest)
    toks = arrays.get("tokens")
    if "phi_q" in arrays or "phi_k" in arrays:
        extra = set(arrays) - {"phi_q", "phi_k", "tokens"}
        if extra or "phi_k" not in arrays or "phi_q" not in arrays:
            raise InputError(f"{path.name}: a factor-form file holds phi_q, phi_k (and tokens); got {sorted(arrays)}")
        prov = Provenance(str(path), digest, "matrix-file", arrays["phi_q"].dtype.name)
        k = from_features(arrays["phi_q"], arrays["phi_k"], prov, tokens=toks)
    else:
        keys = [k for k in arrays if k != "tokens"]
        key = "matrix" if "matrix" in arrays else (keys[0] if len(keys) == 1 else None)
        if key is None:
            raise InputError(f"{path.name}: expected one array (or 'matrix', or 'phi_q'+'phi_k'), got "
                             f"{sorted(arrays)[:6]}; a model's weights: `certify checkpoint {path}` detects "
                             f"known layouts, or give --spec SPEC (README, 'Supported layouts')")
        prov = Provenance(str(path), digest, "matrix-file", arrays[key].dtype.name, details={"array": key})
        k = from_matrix(arrays[key], prov, tokens=toks)
    return _with_tokens(k, tokens) if toks is None else k


def _from_kernel_meta(meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray], path: Path, digest: str) -> Kernel:
    if meta.get("format") != KERNEL_FORMAT:
        raise InputError(f"{path.name}: not a kernel file (format {meta.get('format')!r})")
    prov = Provenance.from_json(meta.get("provenance", {}))
    prov = replace(prov, details={**prov.details, "kernel_file": str(path), "kernel_file_sha256": digest})
    toks = arrays.get("tokens")
    ts = meta.get("token_set")
    try:
        form = Form(meta["form"])
    except (KeyError, ValueError):
        raise InputError(f"{path.name}: bad kernel form") from None
    if form is Form.FACTOR:
        if "phi_q" not in arrays or "phi_k" not in arrays:
            raise InputError(f"{path.name}: factor-form kernel without phi_q/phi_k")
        return from_features(arrays["phi_q"], arrays["phi_k"], prov, tokens=toks, token_set=ts,
                             guarantee=meta.get("guarantee"))
    if "matrix" not in arrays:
        raise InputError(f"{path.name}: matrix-form kernel without a matrix")
    return from_matrix(arrays["matrix"], prov, tokens=toks, token_set=ts)


def _from_kernel_json(obj: Mapping[str, Any], path: Path, digest: str) -> Kernel:
    prov = Provenance.from_json(obj.get("provenance", {}))
    prov = replace(prov, details={**prov.details, "kernel_file": str(path), "kernel_file_sha256": digest})
    toks = _token_strings(obj.get("tokens")) if obj.get("tokens") else None
    ts = obj.get("token_set")
    if obj.get("form") == Form.FACTOR.value:
        q = _json_rows(obj.get("phi_q"), path.name)
        k = _json_rows(obj.get("phi_k"), path.name)
        # exact rationals that are dyadic round-trip to float64 exactly; others are refused
        fq, fk = _dyadic_rows(q, path.name), _dyadic_rows(k, path.name)
        return from_features(fq, fk, prov, tokens=toks, token_set=ts, guarantee=obj.get("guarantee"))
    return from_rationals(_json_rows(obj.get("matrix"), path.name), prov, tokens=toks, token_set=ts)


def _dyadic_rows(rows, name: str) -> np.ndarray:
    out = np.array([[float(v) for v in r] for r in rows], dtype=np.float64)
    for r, fr in zip(rows, out):
        for v, f in zip(r, fr):
            if Fraction(float(f)) != v:
                raise InputError(f"{name}: feature {v} is not exactly a float64")
    return out


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (ValueError, RecursionError) as exc:    # JSONDecodeError, UnicodeDecodeError, 4300-digit ints
        why = " ".join(str(exc).split())[:100] or type(exc).__name__
        raise InputError(f"{path.name} is not valid JSON ({why})") from None


def _json_rows(rows: Any, name: str) -> list[list[Fraction]]:
    if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
        raise InputError(f"{name}: expected a non-empty matrix (list of rows)")
    if len({len(r) for r in rows}) != 1 or not rows[0]:
        raise InputError(f"{name}: ragged or empty matrix")
    check_matrix_shape(len(rows), len(rows[0]), f"{name}: the matrix")
    try:
        return [[str_to_q(v) for v in r] for r in rows]
    except InputError as exc:
        raise InputError(f"{name}: {exc} (write exact rationals as \"p/q\" strings)") from None


def _csv_rows(path: Path) -> list[list[Fraction]]:
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise InputError(f"{path.name} is not a text CSV file") from None
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        raise InputError(f"{path.name}: empty matrix")
    if len({len(r) for r in rows}) != 1:
        raise InputError(f"{path.name}: ragged matrix (rows of lengths {sorted({len(r) for r in rows})[:6]})")
    check_matrix_shape(len(rows), len(rows[0]), f"{path.name}: the matrix")
    out = []
    for i, r in enumerate(rows):
        row = []
        for j, c in enumerate(r):
            # exact: "3", "-1/7", "0.1" (= 1/10), "1e-3"; length and exponent bounded first
            try:
                v = parse_exact(c, "entry")
            except InputError as exc:
                raise InputError(f"{path.name}: entry ({i}, {j}): {exc}") from None
            row.append(v)
        out.append(row)
    return out


def _token_strings(toks: Any) -> np.ndarray:
    if not isinstance(toks, list) or not toks:
        raise InputError("tokens must be a list of 0/1 strings")
    rows = []
    for s in toks:
        if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
            raise InputError(f"a token must be a string of 0s and 1s, got {s!r}")
        rows.append([int(c) for c in s])
    if len({len(r) for r in rows}) != 1:
        raise InputError("tokens have different lengths")
    return np.array(rows, dtype=np.uint8)


# ---------------------------------------------------------------- models/ checkpoints

def _is_checkpoint(path: Path) -> bool:
    """A ``models/`` checkpoint: ``X.json`` with the checkpoint format, or weights
    with such a sibling config."""
    cfg = path if path.suffix == ".json" else path.with_suffix(".json")
    if path.suffix not in (".json", ".safetensors", ".pt", ".pth", "") or not cfg.is_file():
        return False
    try:
        if cfg.stat().st_size > 16 << 20:
            return False
        fmt = json.loads(cfg.read_text()).get("format")
    except (ValueError, AttributeError, OSError, RecursionError):
        return False
    if not isinstance(fmt, str) or not fmt.startswith("certify-attention/"):
        return False
    try:
        from models.checkpoint import FORMAT       # imports torch: only for a real candidate
    except Exception:    # torch missing: not a checkpoint we can read
        return False
    return fmt == FORMAT


def _from_checkpoint(path: Path, tokens: str | None) -> Kernel:
    from models.checkpoint import build_model, load_checkpoint
    config, tensors = load_checkpoint(path)
    model = build_model(config, tensors)
    weights = next((path.with_suffix(s) for s in (".safetensors", ".pt", ".pth")
                    if path.with_suffix(s).is_file()), path)
    # the source is the weights file, named with its own hash; the config is a detail
    prov = Provenance(str(weights), sha256_file(weights), "models.checkpoint", str(config.get("dtype", "float32")),
                      details={"config": str(path.with_suffix(".json")),
                               "architecture": config.get("architecture"),
                               "feature_map": getattr(model, "feature_map", None),
                               "config_sha256": sha256_file(path.with_suffix(".json"))})
    return from_model(model, tokens, prov)


def from_model(model, tokens: str | None, provenance: Provenance) -> Kernel:
    """Factor-form kernel of a module with ``feature_matrices`` (models/ heads,
    adapters). Tokens default to the model's lookup table or ``cube:m``."""
    import torch
    if not hasattr(model, "feature_matrices"):
        raise InputError(f"{type(model).__name__} has no feature maps (not a kernel head)")
    if tokens is None:
        table = getattr(model, "tokens", None)
        if isinstance(table, torch.Tensor):
            toks = table.detach().cpu().numpy().astype(np.uint8)
            token_set, m = "tokens", toks.shape[1]
        elif getattr(model, "m", None) is not None and int(model.m) <= 16:
            token_set, m, toks = f"cube:{int(model.m)}", int(model.m), None
        else:
            raise InputError("give a token set: --tokens cube:M or --family NAME|FILE")
    else:
        token_set, m, toks = parse_tokens(tokens)
    if getattr(model, "m", m) != m:
        raise InputError(f"the model reads {model.m}-bit tokens; the token set has m = {m}")
    guarantee = getattr(getattr(model, "guarantee", None), "value", getattr(model, "guarantee", None))

    def fn(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        with torch.no_grad():
            # tokens may be a read-only view (a frozen family's array): torch needs its own copy
            q, k = model.feature_matrices(torch.from_numpy(np.array(batch, order="C", copy=True)))
        return q.detach().cpu().numpy(), k.detach().cpu().numpy()

    K = (1 << m) if toks is None else len(toks)
    return Kernel(form=Form.FACTOR, provenance=provenance, token_set=token_set, num_tokens=K, m=m,
                  tokens=toks, rank=int(model.rank), feature_fn=fn,
                  guarantee=str(guarantee) if guarantee is not None else None)

