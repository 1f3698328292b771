"""Kernel and matrix files, read with numpy (pickles never).

A kernel file written by :meth:`certify.core.kernel.Kernel.save` (``.npz`` or
``.json``); a matrix file: ``.npy``, ``.npz`` with ``matrix`` or
``phi_q``/``phi_k``, ``.safetensors`` likewise, ``.csv`` of exact decimals or
``p/q``, ``.json`` with ``"p/q"`` strings (a list of rows, or ``{"matrix",
"tokens"}``). Every size is checked against the limits before the data is read.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from certify.checkers.sources import zip_errors
from certify.core.errors import InputError
from certify.core.files import sha256_file
from certify.core.kernel import (
    KERNEL_FORMAT,
    Form,
    Kernel,
    Provenance,
    from_features,
    from_matrix,
    from_rationals,
    parse_tokens,
)
from certify.core.limits import check_matrix_shape, limit, parse_exact
from certify.core.numbers import str_to_q


def read_kernel_file(path: Path, tokens: str | None = None) -> Kernel:
    """A kernel or matrix file (see the module docstring) as a :class:`Kernel`,
    with the token set ``tokens`` attached when the file names none."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise InputError(f"{path} is not a regular file")
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
    except (OSError, EOFError, KeyError) + zip_errors() as exc:
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
