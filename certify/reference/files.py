"""Plain, exact reading of the files a certificate names: read exactly or refuse.

* numeric arrays (``.npy``, ``.npz``, a replay's features file): float64,
  float32 and float16 values become ``Fraction(float(x))`` (exact for these
  widths: every such float is a dyadic rational); integers and booleans become
  Python ints (``tolist``: an int64 of -2^63 stays -2^63, no ``np.abs``
  anywhere). Refused (:class:`~certify.reference.exact.Refused`, exit 2):
  longdouble / float128 (its values are not floats, ``float(x)`` would round),
  complex, object, datetime, timedelta, string, void and structured dtypes,
  NaN and infinities, arrays that are not 2-d, and sizes above the limits;
* ``.csv`` and ``.json`` matrices: every entry parsed as an exact rational
  (``Fraction`` of its text), entries longer than
  :data:`~certify.reference.limits.MAX_NUMBER_CHARS` characters or with an
  exponent beyond +-4000 refused;
* every file's sha256, read in full each time (no cache).

numpy is used only to parse the ``.npy`` container (:func:`numpy.lib.format.read_array`,
no pickles) and to lay out bytes for a hash; it computes nothing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from certify.reference.exact import Fails, Refused
from certify.reference.limits import MAX_FEATURE_ENTRIES, MAX_FILE_BYTES, MAX_NUMBER_CHARS

_EXPONENT = re.compile(r"[eE]([+-]?\d+)")
#: float dtypes read exactly (itemsize in bytes); a wider float (longdouble) is refused
_FLOATS = {2: "float16", 4: "float32", 8: "float64"}


def find(name: Any, base: Path | None) -> Path | None:
    """A named file: absolute, else relative to the certificate's folder, else to the
    working directory; None when it is not a regular file there."""
    if not isinstance(name, str) or not name or "\0" in name:
        return None
    if os.path.isabs(name):
        cands = [Path(name)]
    else:
        cands = ([base / name] if base is not None else []) + [Path.cwd() / name]
    for p in cands:
        try:
            if p.is_file():
                return p
        except OSError:
            continue
    return None


_HUB = re.compile(r"hf://([A-Za-z0-9][\w.-]*/[\w.-]+)@([0-9a-f]{40})/([^\0]+)")


def _hub_cache() -> Path:
    """The local Hugging Face hub cache, from the environment as huggingface_hub reads it."""
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(key):
            return Path(os.path.expanduser(os.path.expandvars(os.environ[key])))
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return Path(os.path.expanduser(os.path.expandvars(home))) / "hub"


def _sha_of(path: Path) -> str | None:
    try:
        return sha256_file(path) if path.is_file() else None
    except OSError:
        return None


def locate(name: Any, sha: Any, base: Path | None) -> Path | None:
    """An input file the certificate names with its sha256: as named (:func:`find`)
    when its sha256 is that one; else, with that sha256, beside the certificate (by
    the path as named, then by its file name) or, for a hub name
    ``hf://org/name@commit/file``, in the local Hugging Face cache's snapshot; else the
    file as named, else the file of that name beside the certificate, whatever its
    bytes (the caller reports the mismatch); None when there is none."""
    named = find(name, base)
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
        return named
    if named is not None and _sha_of(named) == sha:
        return named
    hub = _HUB.fullmatch(name) if isinstance(name, str) else None
    if hub is not None and any(part in ("", ".", "..") for part in hub.group(3).split("/")):
        hub = None
    rel = hub.group(3) if hub else (name if isinstance(name, str) and not os.path.isabs(name) else
                                    Path(str(name)).name)
    if base is not None and isinstance(name, str):
        for c in (base / rel, base / Path(rel).name):
            if ".." not in c.parts and _sha_of(c) == sha:
                return c
    if hub is not None:
        repo, commit = hub.group(1), hub.group(2)
        snap = _hub_cache() / ("models--" + repo.replace("/", "--")) / "snapshots" / commit / rel
        if _sha_of(snap) == sha:
            return snap
    if named is not None:
        return named
    if base is not None and hub is None and isinstance(name, str) and name and not os.path.isabs(name):
        near = base / Path(name).name
        if _sha_of(near) is not None:
            return near
    return None


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def exact_rows(a: Any, what: str) -> list[list[Any]]:
    """A 2-d numeric array as rows of exact values (ints, or Fractions for floats),
    or :class:`Refused`."""
    if not isinstance(a, np.ndarray):
        raise Refused(f"{what}: not an array")
    dt = a.dtype
    if dt.fields is not None or dt.kind not in "biuf":
        raise Refused(f"{what}: dtype {dt} is not read exactly here (only float16/32/64, "
                      "integers and booleans)")
    if dt.kind == "f" and dt.itemsize not in _FLOATS:
        raise Refused(f"{what}: dtype {dt} ({dt.itemsize * 8}-bit float, e.g. longdouble) is "
                      "refused: its values are not float64 and would be rounded")
    if a.ndim != 2 or 0 in a.shape:
        raise Refused(f"{what}: expected a non-empty 2-d array, got shape {a.shape}")
    if a.size > MAX_FEATURE_ENTRIES:
        raise Refused(f"{what}: {a.shape[0]} x {a.shape[1]} = {a.size} entries, above the reference "
                      f"checker's limit of {MAX_FEATURE_ENTRIES}")
    if dt.kind == "f":
        vals = a.astype(np.float64).tolist()         # exact: float16/32 widen without rounding
        out = []
        for r in vals:
            row = []
            for x in r:
                if x != x or x in (float("inf"), float("-inf")):
                    raise Refused(f"{what}: NaN or infinite entry")
                row.append(Fraction(x))
            out.append(row)
        return out
    return [[int(x) for x in r] for r in a.tolist()]     # Python ints: exact for every width


def _number(text: str, what: str) -> Fraction:
    t = text.strip()
    m = _EXPONENT.search(t)
    if len(t) > MAX_NUMBER_CHARS or (m and abs(int(m.group(1))) > 4000):
        raise Refused(f"{what}: entry {t[:40]!r} is longer than {MAX_NUMBER_CHARS} characters or "
                      "its exponent is beyond +-4000")
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        raise Refused(f"{what}: entry {t[:40]!r} is not a number") from None


def read_source(path: Path, label: str) -> dict[str, Any]:
    """``{"matrix": rows, "dtype": name}`` or ``{"phi_q": rows, "phi_k": rows, "dtype": name}``
    (exact values) of a matrix or features file, or :class:`Refused`. ``dtype`` is what the
    file holds: the array's dtype name (``None`` when a features file's two arrays differ),
    ``rational`` for a CSV or JSON text."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise Refused(f"{label}: {size} bytes, above the reference checker's limit of "
                      f"{MAX_FILE_BYTES} bytes")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            a = np.load(path, allow_pickle=False)
            return {"matrix": exact_rows(a, label), "dtype": a.dtype.name}
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                names = list(z.files)
                if "kernel_meta" in names:
                    raise Refused(f"{label}: a kernel file of `certify extract` (bound by its "
                                  "provenance, not read as a matrix here)")
                if "phi_q" in names and "phi_k" in names:
                    q, k = z["phi_q"], z["phi_k"]
                    return {"phi_q": exact_rows(q, f"{label} phi_q"),
                            "phi_k": exact_rows(k, f"{label} phi_k"),
                            "dtype": q.dtype.name if q.dtype.name == k.dtype.name else None}
                rest = [k for k in names if k != "tokens"]
                key = "matrix" if "matrix" in names else (rest[0] if len(rest) == 1 else None)
                if key is None:
                    raise Refused(f"{label}: no single matrix among {sorted(names)}")
                a = z[key]
                return {"matrix": exact_rows(a, label), "dtype": a.dtype.name}
        if suffix == ".csv":
            rows = [r for r in csv.reader(io.StringIO(path.read_text()))
                    if r and any(c.strip() for c in r)]
            out = [[_number(c, label) for c in r] for r in rows]
        elif suffix == ".json":
            obj = json.loads(path.read_text())
            if isinstance(obj, dict) and "format" in obj:
                raise Refused(f"{label}: a kernel file of `certify extract` (bound by its "
                              "provenance, not read as a matrix here)")
            jrows = obj.get("matrix") if isinstance(obj, dict) else obj
            if not isinstance(jrows, list) or not all(isinstance(r, list) for r in jrows):
                raise Refused(f"{label}: no matrix in the JSON file")
            out = []
            for r in jrows:
                row = []
                for v in r:
                    if isinstance(v, bool) or not isinstance(v, (int, str)):
                        raise Refused(f"{label}: entry {v!r:.30} is not an exact number")
                    row.append(Fraction(v) if isinstance(v, int) else _number(v, label))
                out.append(row)
        else:
            raise Refused(f"{label}: not a matrix file type the reference checker reads "
                          f"({suffix or 'no suffix'})")
    except Refused:
        raise
    except (OSError, ValueError, KeyError, EOFError, UnicodeDecodeError) as exc:
        raise Refused(f"{label}: cannot read it ({type(exc).__name__})") from None
    except Exception as exc:                    # a corrupt zip container, etc.
        raise Refused(f"{label}: cannot read it ({type(exc).__name__})") from None
    if not out or len({len(r) for r in out}) != 1 or not out[0]:
        raise Refused(f"{label}: not a non-empty rectangular matrix")
    if len(out) * len(out[0]) > MAX_FEATURE_ENTRIES:
        raise Refused(f"{label}: {len(out)} x {len(out[0])} entries, above the reference checker's "
                      f"limit of {MAX_FEATURE_ENTRIES}")
    return {"matrix": out, "dtype": "rational"}


def read_features_file(path: str) -> tuple[list[list[Fraction]], list[list[Fraction]]]:
    """The features a replay wrote: two ``.npy`` records back to back (``phi_q``, then
    ``phi_k``), nothing after them, read exactly."""
    try:
        with open(path, "rb") as f:
            arrays = [np.lib.format.read_array(f, allow_pickle=False) for _ in range(2)]
            if f.read(1):
                raise ValueError("bytes after the two arrays")
    except (OSError, ValueError, EOFError) as exc:
        raise Fails(f"the replay's features file cannot be read ({exc})") from None
    q, k = (exact_rows(a, f"replayed {n}") for a, n in zip(arrays, ("phi_q", "phi_k")))
    return [[Fraction(x) for x in r] for r in q], [[Fraction(x) for x in r] for r in k]


def features_sha256(rows: list[list[Fraction]], dtype: str) -> str:
    """sha256 of a feature matrix laid out in ``dtype`` (row-major, little-endian), the
    certificate's ``features_sha256``: every value must be exactly representable in
    ``dtype`` (else :class:`Fails`); a zero is +0.0 (the hash is of the values)."""
    dt = np.dtype(dtype) if isinstance(dtype, str) else None
    if dt is None or dt.kind not in "fiu" or (dt.kind == "f" and dt.itemsize not in _FLOATS):
        raise Fails(f"features dtype {dtype!r} is not one the reference checker lays out")
    if dt.kind == "f":
        flat = []
        for r in rows:
            for x in r:
                f = float(x)                              # correctly rounded to float64
                if Fraction(f) != x:
                    raise Fails(f"a feature value {x} is not a float64")
                flat.append(f + 0.0)                      # -0.0 -> +0.0
        a = np.array(flat, dtype=np.float64)
        out = a.astype(dt)
        if not all(Fraction(float(v)) == Fraction(w) for v, w in zip(out.tolist(), flat)):
            raise Fails(f"a feature value is not representable in {dtype}")
    else:
        flat_i = []
        for r in rows:
            for x in r:
                if x.denominator != 1:
                    raise Fails(f"a feature value {x} is not an integer ({dtype})")
                flat_i.append(int(x))
        try:
            out = np.array(flat_i, dtype=dt)
        except OverflowError:
            raise Fails(f"a feature value does not fit {dtype}") from None
    return hashlib.sha256(out.astype(dt.newbyteorder("<")).tobytes()).hexdigest()


# ---------------------------------------------------------------- safetensors weights

#: safetensors dtype codes -> (the canonical tensor-set name, bytes per element)
SAFETENSORS = {"F64": ("float64", 8), "F32": ("float32", 4), "F16": ("float16", 2), "BF16": ("bfloat16", 2),
               "I64": ("int64", 8), "I32": ("int32", 4), "I16": ("int16", 2), "I8": ("int8", 1),
               "U8": ("uint8", 1), "BOOL": ("bool", 1)}
TENSOR_SET = "certify-attention/tensor-set/1"
#: the largest safetensors header read (the format allows up to 100 MB)
MAX_HEADER_BYTES = 100 << 20


def safetensors_sha256(path: Path) -> str:
    """The canonical hash of the tensors of a safetensors file (the certificate's
    ``weights_sha256``): sha256 of the line ``certify-attention/tensor-set/1``, then per
    tensor in the order of its name the canonical JSON of ``{bytes, dtype, name, shape}``,
    a newline and its bytes (as stored: little-endian, C order). The file is read
    exactly or not at all (:class:`Fails`, naming what is wrong): an 8-byte little-endian
    header length within the file, a JSON object header, each tensor a known dtype, a
    shape of non-negative integers and data offsets ``[a, b]`` inside the data with
    ``b - a`` its size -- all checked against the file's size before any tensor is read."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise Fails(f"{path.name}: {size} bytes, above the reference checker's limit of {MAX_FILE_BYTES}")
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise Fails(f"{path.name}: not a safetensors file (no header length)")
        n = int.from_bytes(head, "little")
        if not 2 <= n <= min(MAX_HEADER_BYTES, size - 8):
            raise Fails(f"{path.name}: header length {n} is not within the file ({size} bytes)")
        try:
            meta = json.loads(f.read(n))
        except (ValueError, UnicodeDecodeError):
            raise Fails(f"{path.name}: the header is not JSON") from None
        if not isinstance(meta, dict):
            raise Fails(f"{path.name}: the header is not a JSON object")
        data_len = size - 8 - n
        entries = []
        for name, info in meta.items():
            if name == "__metadata__":
                continue
            if not isinstance(info, dict) or info.get("dtype") not in SAFETENSORS \
                    or not isinstance(info.get("shape"), list) or not isinstance(info.get("data_offsets"), list):
                raise Fails(f"{path.name}: tensor {name!r:.60} is not {{dtype, shape, data_offsets}} of a "
                            "known dtype")
            dtype, width = SAFETENSORS[info["dtype"]]
            shape, offs = info["shape"], info["data_offsets"]
            if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape) \
                    or len(offs) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in offs):
                raise Fails(f"{path.name}: tensor {name!r:.60} has a shape or offsets that are not integers")
            count = 1
            for d in shape:
                count *= d
            a, b = offs
            if not 0 <= a <= b <= data_len or b - a != count * width:
                raise Fails(f"{path.name}: tensor {name!r:.60}: offsets {offs} do not hold its "
                            f"{count} x {width} bytes within the data")
            entries.append((name, dtype, shape, a, b))
        h = hashlib.sha256(TENSOR_SET.encode() + b"\n")
        for name, dtype, shape, a, b in sorted(entries):
            f.seek(8 + n + a)
            data = f.read(b - a)
            if len(data) != b - a:
                raise Fails(f"{path.name}: tensor {name!r:.60} is cut short")
            h.update(json.dumps({"name": name, "dtype": dtype, "shape": shape, "bytes": b - a},
                                sort_keys=True, separators=(",", ":")).encode() + b"\n")
            h.update(data)
    return h.hexdigest()
