"""Sources bound to the evidence (standard library and numpy only).

A rank-type claim names its source (``parameters.source``, ``source_sha256``,
``adapter``). What ``certify verify`` can do with it:

* a **matrix file** (adapter ``matrix-file``: ``.npy``, ``.npz``, ``.csv``,
  ``.json``) that is present: its sha256 must be the claim's, and the exact
  matrix (or the features ``phi_q``, ``phi_k``) is re-read here with numpy and
  must be the one the evidence embeds (matrix form: the exact rationals; factor
  form: the features' sha256). A large matrix that is not embedded is re-read
  and handed to the checker, which hashes it against ``matrix_sha256``; a numpy
  array (``.npy``, ``.npz``) under a dyadic scale is made integral exactly in
  numpy (an int64 array, up to ``MAX_SOURCE_BYTES`` on disk) for the claim kinds
  whose checker reads arrays (``ARRAY_KINDS``) when every entry stays below 2^62
  in magnitude (bounds in Python integers: ``np.abs`` leaves int64 -2^63
  negative), everything else through Fractions (up to ``MAX_SOURCE_ENTRIES``).
  Every number is read exactly or refused (:func:`exact_array`: bool, (u)int8..64,
  float16/32/64; longdouble, complex, object, datetime, strings, structured, NaN,
  Inf and empty arrays are refused, and :func:`refused_source` makes ``certify
  verify`` refuse such a certified file with one line, exit 2); a certified file
  whose exact entries are not the evidence's matrix fails the claim
  (:class:`NotTheMatrix`).
* a matrix file that is **absent**: assumption ``source:<name>``.
* a **checkpoint or construction** (any other adapter): the weights -> features
  step is not re-derived here, so it is assumption ``extraction:<source>``
  unless ``--replay-extraction`` re-ran it in a separate process and the
  features' sha256 came out equal (a different value fails the claim). The
  features of a third-party head and of a ``models/`` checkpoint are canonical
  (``models.canonical``: the same bits on every machine) and a construction's
  are exact, so neither torch nor the CPU decides their replay. Where a
  claim's summaries are ``trusted`` (features too
  large to embed), the replay also writes the features to a file
  (:class:`Replayed`), and :func:`certify.checkers.gram.summary_problems`
  recomputes the summaries from it.

Input files are found by their sha256 (:func:`locate`), standard library only:
as named (absolute, or relative to the certificate's folder or the working
directory), beside the certificate by file name, in the local Hugging Face
cache for a hub name ``hf://org/name@<commit>/<file>`` (the cache folder as
huggingface_hub computes it from the environment, :func:`hub_cache_dir`), and
under each ``--weights`` folder (by name, then by hashing its files). A file is
used only when its sha256 is the certificate's. The replay reads a model's
files (:func:`model_files`) where they were found, through a private folder of
links named as the certificate names them when any was found elsewhere.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

import numpy as np

from certify.checkers import scratch
from certify.checkers.reading import path_problem

MATRIX_SUFFIXES = (".npy", ".npz", ".csv", ".json")
#: largest source verify re-reads exactly (bytes on disk, entries); beyond: an assumption
MAX_SOURCE_BYTES = 256 << 20
MAX_SOURCE_ENTRIES = 1 << 22


def zip_errors() -> tuple[type[Exception], ...]:
    """``zipfile.BadZipFile`` once zipfile is loaded (numpy loads it to read an ``.npz``; no
    other file raises it), evaluated only when an exception reaches the clause naming it."""
    zf = sys.modules.get("zipfile")
    return (zf.BadZipFile,) if zf is not None else ()


def _stat_key(path: str | os.PathLike) -> tuple[int, ...]:
    st = os.stat(path)
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 (hex) of a file's bytes, read once within one certificate's check while the
    file is unchanged (:mod:`certify.checkers.scratch`, keyed by device, inode, size, and
    modification and change times in ns; kept only when they are the same after the read as
    before: a write changes the change time, which no call can set back): ``certify rank``'s
    read of its source and its own check, or a verify that binds a claim's source and
    compares the inputs, hash it once."""
    key = _stat_key(path)
    s = scratch.current()
    if s is not None and (hit := s.lookup(("sha256_file", key))) is not None:
        return hit
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if s is not None and _stat_key(path) == key:
        s.put(("sha256_file", key), h.hexdigest())
    return h.hexdigest()


def candidates(name: str, base: "Base") -> list[Path]:
    """Where a named input file is looked for by its name: the name itself when absolute,
    else relative to the certificate's folder, then to the working directory."""
    folder = places(base).folder
    if not isinstance(name, str) or not name or "\0" in name or name.startswith(HUB_SCHEME):
        return []
    return [Path(name)] if os.path.isabs(name) else \
        [p for p in ((folder / name) if folder else None, Path.cwd() / name) if p is not None]


def not_found(name: str, base: "Base") -> str:
    """Why no file was found for ``name``: ``absent`` when nothing is at any place it is
    looked for, else what is there (a folder, a FIFO, a symbolic link loop, ...:
    :func:`certify.checkers.reading.path_problem`)."""
    for p in candidates(name, base):
        why = path_problem(p)
        if why is not None:
            return f"not read: {p} is {why}" if not why.startswith(("permission", "name", "a part")) \
                else f"not read: {p}: {why}"
    return "absent"


def find(name: str, base: "Base") -> Path | None:
    """A named input file: absolute, else relative to the certificate's folder or
    the working directory (by name only; :func:`locate` also finds it by hash)."""
    for p in candidates(name, base):
        try:
            if p.is_file():
                return p
        except OSError:
            continue
    return None


# ---------------------------------------------------------------- finding inputs by hash

#: how a certificate names a file of a Hugging Face hub snapshot: hf://org/name@<commit>/<file>
HUB_SCHEME = "hf://"
_HUB_NAME = re.compile(r"^hf://(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)@(?P<commit>[0-9a-f]{40})/(?P<rel>[^\0]+)$")
_SHA = re.compile(r"^[0-9a-f]{64}$")


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The local Hugging Face hub cache, as huggingface_hub computes it
    (``HF_HUB_CACHE``, ``HUGGINGFACE_HUB_CACHE``, ``HF_HOME/hub``,
    ``XDG_CACHE_HOME/huggingface/hub``, ``~/.cache/huggingface/hub``), read
    from the environment at each call."""
    env = os.environ if env is None else env
    for key in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(key):
            return Path(os.path.expanduser(os.path.expandvars(env[key])))
    home = env.get("HF_HOME") or os.path.join(
        env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "huggingface")
    return Path(os.path.expanduser(os.path.expandvars(home))) / "hub"


def hub_name(name: str) -> tuple[str, str, str] | None:
    """``(repo id, commit, file)`` of a hub name ``hf://org/name@commit/file``, else None."""
    m = _HUB_NAME.fullmatch(name) if isinstance(name, str) else None
    if m is None or any(part in ("", ".", "..") for part in m.group("rel").split("/")):
        return None
    return m.group("repo"), m.group("commit"), m.group("rel")


class Places:
    """Where a certificate's input files are looked for (:func:`locate`): as named
    (absolute, or relative to the certificate's folder or the working directory),
    beside the certificate, in the local Hugging Face cache (a hub name, by repo id
    and commit), and under each ``--weights`` folder."""

    def __init__(self, folder: Path | None, weights: Sequence[str | os.PathLike] = (),
                 hub: Path | None = None) -> None:
        self.folder = folder
        self.weights = tuple(Path(w) for w in weights)
        self.hub = hub

    def hub_cache(self) -> Path:
        return self.hub if self.hub is not None else hub_cache_dir()


#: where a certificate's inputs are looked for: its folder, or :class:`Places`
Base = Union[Path, Places, None]


def places(base: Base) -> Places:
    return base if isinstance(base, Places) else Places(base)


class Found:
    """A located input file: its path, how it was found, and whether its sha256 is
    the certificate's (only a file found by its own name may differ: a file found
    elsewhere is used only when its hash matches)."""

    def __init__(self, path: Path, how: str, matches: bool = True) -> None:
        self.path, self.how, self.matches = path, how, matches

    def __repr__(self) -> str:
        return f"Found({str(self.path)!r}, {self.how!r}, {self.matches})"


def _digest(path: Path) -> str | None:
    try:
        return sha256_file(path) if path.is_file() else None
    except OSError:
        return None


def _files_under(folder: Path) -> list[Path]:
    out = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        out += [Path(root) / f for f in sorted(files)]
    return out


def _by_hash(folder: Path, sha: str) -> Path | None:
    """The file under ``folder`` whose sha256 is ``sha``: every file under it hashed once
    within one check's scratch (a ``--weights`` scan; :mod:`certify.checkers.scratch`)."""
    def scan() -> dict[str, Path]:
        index: dict[str, Path] = {}
        seen: set[str] = set()
        for f in _files_under(folder):
            real = os.path.realpath(f)
            if real in seen:
                continue
            seen.add(real)
            d = _digest(f)
            if d is not None:
                index.setdefault(d, f)
        return index
    return scratch.remember(("weights_scan", os.path.realpath(folder)), scan).get(sha)


def _in_folder(folder: Path, name: str, sha: str, recursive: bool) -> Path | None:
    """A file with sha256 ``sha`` in ``folder`` by its name (its path relative to
    the folder, its file name); ``recursive`` (a ``--weights`` folder): also a hub
    cache's layout, the same file name anywhere under it, then every file under
    it, hashed once within one check's scratch."""
    hub = hub_name(name)
    rel = hub[2] if hub else (name if not os.path.isabs(name) else Path(name).name)
    base = Path(rel).name
    cands = [folder / rel, folder / base]
    if hub is not None and recursive:
        repo_dir = "models--" + hub[0].replace("/", "--")
        for pre in (Path(), Path(repo_dir), Path("hub") / repo_dir):
            cands += [folder / pre / "snapshots" / hub[1] / rel, folder / pre / "blobs" / sha]
    elif recursive:
        cands += [folder / "blobs" / sha]
    for c in cands:
        if ".." not in c.parts and _digest(c) == sha:
            return c
    if not recursive:
        return None
    for f in _files_under(folder):
        if f.name == base and _digest(f) == sha:
            return f
    return _by_hash(folder, sha)


def locate(name: str, sha: str | None, base: "Base") -> Found | None:
    """An input file of a certificate, found by its sha256 (module docstring of
    :mod:`certify.checkers.sources`): (1) as named; (2) beside the certificate,
    by file name, then by hash; (3) a hub name in the local Hugging Face cache;
    (4) under each ``--weights`` folder, by name, then by hash. Every file found
    is checked by sha256 before it is used; a file found as named (else by its file
    name beside the certificate) whose hash differs is returned (``matches``
    False, reported as a mismatch) only when no other file matches.
    Without a sha256, the file as named (:func:`find`)."""
    where = places(base)
    named = find(name, where)
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        return Found(named, "as named", False) if named is not None else None
    if named is not None and _digest(named) == sha:
        return Found(named, "as named")
    if where.folder is not None:
        p = _in_folder(where.folder, name, sha, recursive=False)
        if p is not None:
            return Found(p, "beside the certificate")
    hub = hub_name(name)
    if hub is not None:
        snap = where.hub_cache() / ("models--" + hub[0].replace("/", "--")) / "snapshots" / hub[1] / hub[2]
        if _digest(snap) == sha:
            return Found(snap, "in the local Hugging Face cache")
    for folder in where.weights:
        p = _in_folder(folder, name, sha, recursive=True)
        if p is not None:
            return Found(p, f"under --weights {folder}")
    if named is not None:
        return Found(named, "as named", False)
    if where.folder is not None and hub is None and not os.path.isabs(name):
        near = where.folder / Path(name).name          # its file name beside the certificate, other bytes
        if _digest(near) is not None:
            return Found(near, "beside the certificate", False)
    return None


def not_found_hint(name: str, where: "Base") -> str:
    """Where a missing input was looked for, and what to pass (one line)."""
    w = places(where)
    looked = ["as named", "beside the certificate" if w.folder is not None else None]
    hub = hub_name(name)
    if hub is not None:
        looked.append(f"in the local Hugging Face cache ({w.hub_cache()}, {hub[0]} at commit {hub[1][:12]})")
    looked += [f"under --weights {f}" for f in w.weights]
    return (f"{name} is not found by its sha256 ({', '.join(x for x in looked if x)}); "
            "pass --weights DIR, a folder holding the model's files (any layout: found by sha256)"
            + (f", or download it: `hf download {hub[0]} --revision {hub[1]}`" if hub else ""))


class SourceError(Exception):
    pass


class InexactSource(SourceError):
    """The source file is present and is the one certified, but holds numbers this reader
    does not take exactly (a dtype outside :data:`EXACT_KINDS`, NaN or Inf): no claim about
    its exact values can hold, so the claim fails (not an assumption)."""


class NotTheMatrix(SourceError):
    """The source file is present and is the one certified, but its exact entries are not the
    evidence's matrix under the evidence's scale: the claim fails (not an assumption)."""


#: array kinds and item sizes read exactly here (each value a Python int, or a float64 taken
#: as the dyadic rational it is); longdouble, complex, object, datetime, strings, void: refused
EXACT_KINDS = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}


def exact_array(a: np.ndarray, what: str = "matrix") -> np.ndarray:
    """``a`` when every value of it is read exactly (its dtype in :data:`EXACT_KINDS`, in either
    byte order, finite when it is a float array) and it is not empty; else :class:`InexactSource`."""
    dt = a.dtype
    if dt.fields is not None or dt.subdtype is not None or dt.itemsize not in EXACT_KINDS.get(dt.kind, ()):
        raise InexactSource(f"the {what} has dtype {dt.name if dt.fields is None else dt.str}, which is not read exactly "
                            "(bool, (u)int8..64, float16/32/64 only)")
    if dt.kind == "f" and not np.all(np.isfinite(a)):
        raise InexactSource(f"the {what} has NaN or Inf entries")
    if a.size == 0:
        raise InexactSource(f"the {what} is empty")
    return a


_EXPONENT = re.compile(r"[eE]([+-]?\d+)")


def _number(text: str) -> Fraction:
    """An exact number from a CSV/JSON entry, refusing ones whose size alone would
    take unbounded time (``1e999999999`` is 10^999999999 as a Fraction)."""
    t = text.strip()
    m = _EXPONENT.search(t)
    if len(t) > 4000 or (m and abs(int(m.group(1))) > 4000):
        raise SourceError(f"entry {t[:40]!r} is too large to read exactly here")
    return Fraction(t)


def _exact_array(a: np.ndarray) -> list[list[Fraction]]:
    if a.size > MAX_SOURCE_ENTRIES:
        raise SourceError(f"{a.size} entries: too large to re-read exactly here")
    exact_array(a)
    if a.ndim != 2:
        raise SourceError(f"expected a 2-d numeric array, got {a.dtype} of shape {a.shape}")
    # tolist(): Python ints, or Python floats (float16/32 widen to float64 exactly)
    return [[Fraction(v) for v in row] for row in a.tolist()]


def read_source(path: Path) -> dict[str, Any]:
    """``{"matrix": rows}`` or ``{"phi_q": array, "phi_k": array}`` read as the
    producer reads it (certify.sources.load.load_kernel), without pickles."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return {"matrix": exact_array(np.load(path, allow_pickle=False))}
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                arrays = {k: z[k] for k in z.files}
            if "kernel_meta" in arrays:
                raise SourceError("a kernel file from `certify extract`: bound by its provenance")
            if "phi_q" in arrays and "phi_k" in arrays:
                return {"phi_q": exact_array(arrays["phi_q"], "phi_q"), "phi_k": exact_array(arrays["phi_k"], "phi_k")}
            keys = [k for k in arrays if k != "tokens"]
            key = "matrix" if "matrix" in arrays else (keys[0] if len(keys) == 1 else None)
            if key is None:
                raise SourceError(f"no single matrix among {sorted(arrays)}")
            return {"matrix": exact_array(arrays[key])}
        if suffix == ".csv":
            rows = [r for r in csv.reader(io.StringIO(path.read_text()))
                    if r and any(c.strip() for c in r)]
            return {"matrix": [[_number(c) for c in r] for r in rows]}
        if suffix == ".json":
            obj = json.loads(path.read_text())
            if isinstance(obj, dict) and "format" in obj:
                raise SourceError("a kernel file from `certify extract`: bound by its provenance")
            jrows = obj.get("matrix") if isinstance(obj, dict) else obj
            if not isinstance(jrows, list) or not all(isinstance(r, list) for r in jrows):
                raise SourceError("no matrix in the JSON file")
            out = []
            for r in jrows:
                row = []
                for v in r:
                    if isinstance(v, bool) or not isinstance(v, (int, str)):
                        raise SourceError(f"entry {v!r:.30} is not an exact number")
                    row.append(Fraction(v) if isinstance(v, int) else _number(v))
                out.append(row)
            return {"matrix": out}
    except SourceError:
        raise
    except (OSError, ValueError, KeyError, ZeroDivisionError, UnicodeDecodeError, EOFError) + zip_errors() as exc:
        raise SourceError(f"cannot read it: {type(exc).__name__}") from None
    raise SourceError(f"not a matrix file type verify reads ({suffix or 'no suffix'})")


def _rows(value: Any) -> list[list[Fraction]]:
    if isinstance(value, np.ndarray):
        return _exact_array(value)
    return value


#: claim kinds whose checker reads a large matrix as an int64 array (no Fractions)
ARRAY_KINDS = ("exact_rank", "nonnegative")


def _integer_array(a: np.ndarray, scale: Mapping[str, Any]) -> np.ndarray | None:
    """The int64 matrix ``N = a 2^-e`` of a numeric array under a dyadic scale,
    computed exactly with numpy (a power-of-two scaling, then ``trunc == value``
    and the count of nonzeros, which an underflow would change); None when ``N``
    does not fit int64 or the scale is not dyadic (the exact reader decides)."""
    if scale.get("kind") != "dyadic" or a.ndim != 2 or a.size == 0:
        return None
    exact_array(a)
    e = int(scale["exponent"])
    if a.dtype.kind == "f":
        x = a.astype(np.float64, copy=False)        # read only below: no copy of a float64 source
        if abs(e) > 2200:
            return None
        X = np.ldexp(x, -e)            # exact (a power of two); compared scaled, as 2^(62+e)
        if max(float(X.max()), -float(X.min())) >= 2.0 ** 62:   # overflows a float for entries near 1e308
            return None
        N = X.astype(np.int64)
        if not (N == X).all() or np.count_nonzero(N) != np.count_nonzero(x):
            raise NotTheMatrix("the source's entries are not the evidence's matrix (scale differs)")
        return N
    # the bounds in Python integers (np.abs(-2^63) is negative in int64; a uint64 above 2^63 - 1
    # wraps): beyond 2^62 in magnitude (after the shift) the exact reader decides, never int64
    lo, hi = int(a.min()), int(a.max())
    if e > 62 or max(hi, -lo) >= 1 << (62 + min(e, 0)):
        return None
    ai = a.astype(np.int64)
    if e <= 0:
        return ai << -e
    if np.any(ai & ((1 << e) - 1)):
        raise NotTheMatrix("the source's entries are not the evidence's matrix (scale differs)")
    return ai >> e


def _integer_rows(values: list[list[Fraction]], scale: Mapping[str, Any]) -> list[list[int]]:
    """The integer matrix N with ``values = N * scale`` (dyadic or row denominators),
    entry by entry in integers: ``N = numerator * mul / (denominator * div)``."""
    if scale.get("kind") == "dyadic":
        e = int(scale["exponent"])
        factors = [(1 << -e, 1) if e < 0 else (1, 1 << e)] * len(values)
    elif scale.get("kind") == "row_denominators":
        dens = scale["row_den"]
        if len(dens) != len(values):
            raise NotTheMatrix("the source has a different number of rows")
        factors = [(int(d), 1) for d in dens]
    else:
        raise NotTheMatrix("unknown scale")
    out = []
    for r, (mul, div) in zip(values, factors):
        row = []
        for x in r:
            q, rem = divmod(x.numerator * mul, x.denominator * div)
            if rem:
                raise NotTheMatrix("the source's entries are not the evidence's matrix (scale differs)")
            row.append(q)
        out.append(row)
    return out


def _feature_sha(arr: np.ndarray, dtype: str) -> str:
    from certify.checkers.common import without_negative_zeros
    a = np.ascontiguousarray(without_negative_zeros(arr.astype(dtype)),
                             dtype=np.dtype(dtype).newbyteorder("<"))
    return hashlib.sha256(a.tobytes()).hexdigest()


def _file_dtype(value: Any) -> str:
    """The dtype a re-read file holds, named as the producer names it
    (:class:`certify.core.kernel.Provenance`): an array's dtype name, ``rational`` for the
    exact numbers of a CSV or JSON text."""
    return value.dtype.name if isinstance(value, np.ndarray) else "rational"


def _dtype_problems(claim: Mapping[str, Any], data: Mapping[str, Any]) -> list[str]:
    """The claim's ``parameters.dtype`` (and a features file's ``features_sha256.dtype``) must
    be what the file holds: a field the sentence does not print is still bound, never
    passed as stated."""
    p, ev = claim.get("parameters") or {}, claim.get("evidence") or {}
    if "phi_q" in data:
        held = _file_dtype(data["phi_q"])
        if _file_dtype(data["phi_k"]) != held:
            return [f"the source file's phi_q is {held}, its phi_k {_file_dtype(data['phi_k'])}"]
        fs = ev.get("features_sha256")
        if isinstance(fs, Mapping) and fs.get("dtype") != held:
            return [f"features_sha256.dtype {fs.get('dtype')!r:.20} is not the source file's {held}"]
    else:
        held = _file_dtype(data.get("matrix"))
    if "dtype" in p and p["dtype"] != held:
        return [f"parameters.dtype {p['dtype']!r:.20} is not the source file's {held}"]
    return []


def _bind_float_matrix(claim: Mapping[str, Any], data: Mapping[str, Any]) -> tuple[list[str], Any]:
    """A ``numerical_rank`` claim's source: the float64 values of an array file (float16/32/64 as
    they are, integers of at most 53 bits), hashed as :func:`certify.checkers.kernel.hashing.
    float64_sha256` hashes them; passed to the checker unless the evidence embeds them."""
    from certify.checkers.kernel.hashing import float64_sha256
    ev = claim.get("evidence") or {}
    raw = data.get("matrix")
    if not isinstance(raw, np.ndarray):
        return ["a numerical_rank claim is about an array of floats: the source holds "
                + ("features" if raw is None else "text numbers")], None
    exact_array(raw)
    if raw.dtype.kind in "biu" and raw.size and (int(raw.max()) > 1 << 53 or int(raw.min()) < -(1 << 53)):
        return ["the source's integers are not all float64 values"], None
    A = np.ascontiguousarray(raw, dtype=np.float64)
    if A.ndim != 2 or [int(v) for v in A.shape] != ev.get("shape"):
        return [f"the source matrix has shape {list(A.shape)}, the evidence's {ev.get('shape')}"], None
    if float64_sha256(A) != ev.get("values_sha256"):
        return ["the source's values are not the evidence's matrix (values_sha256 differs)"], None
    return [], (None if "matrix" in ev else A)


def _read_once(path: Path) -> dict[str, Any]:
    """:func:`read_source`, read once within one certificate's check while the file is unchanged
    (the same stat key as :func:`sha256_file`; the arrays are made read-only, shared by the
    claims that bind the file)."""
    key = _stat_key(path)
    s = scratch.current()
    if s is not None and (hit := s.lookup(("read_source", key))) is not None:
        return hit
    data = read_source(path)
    for a in data.values():
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    if s is not None and _stat_key(path) == key:
        s.put(("read_source", key), data)
    return data


def source_features_key(dtype: str, sha_q: str, sha_k: str) -> tuple[str, ...]:
    """The scratch key of a present factor file's features whose sha256 in ``dtype`` were found
    to be ``sha_q``, ``sha_k`` (their complete content: :func:`_bind_matrix_file` puts them)."""
    return ("source_features", dtype, sha_q, sha_k)


def _bind_matrix_file(claim: Mapping[str, Any], path: Path) -> tuple[list[str], Any]:
    ev = claim.get("evidence") or {}
    data = _read_once(path)
    wrong = _dtype_problems(claim, data)
    if wrong:
        return wrong, None
    if claim.get("kind") == "numerical_rank":
        return _bind_float_matrix(claim, data)
    if ev.get("form") == "matrix" or "matrix_sha256" in ev:
        if "matrix" not in data:
            return ["the source holds features, the claim a matrix"], None
        scale = ev.get("scale")
        raw = data["matrix"]
        if isinstance(raw, np.ndarray) and isinstance(scale, dict) and claim.get("kind") in ARRAY_KINDS:
            N = _integer_array(raw, scale)             # large arrays: exact in numpy
            if N is not None:
                if ev.get("shape") is not None and list(N.shape) != ev.get("shape"):
                    return [f"the source matrix is {N.shape[0]} x {N.shape[1]}, the evidence's "
                            f"{ev.get('shape')}"], None
                if "matrix" in ev:
                    return ([] if ev["matrix"] == N.tolist() else
                            ["the embedded matrix is not the source file's matrix"]), None
                return [], N
        values = _rows(raw)
        shape = ev.get("shape")
        if shape is not None and [len(values), len(values[0]) if values else 0] != shape:
            return [f"the source matrix is {len(values)} x {len(values[0]) if values else 0}, "
                    f"the evidence's {shape}"], None
        if not isinstance(scale, dict):
            return ["the evidence has no scale to compare the source with"], None
        Nrows = _integer_rows(values, scale)
        if "matrix" in ev:                    # embedded: it must be the file's
            if ev["matrix"] != Nrows:
                return ["the embedded matrix is not the source file's matrix"], None
            return [], None
        return [], Nrows                          # not embedded: the checker hashes the file's
    fs = ev.get("features_sha256")
    if isinstance(fs, dict) and "phi_q" in data:
        dtype = fs.get("dtype")
        if not isinstance(dtype, str):
            return ["features_sha256 has no dtype"], None
        shas = scratch.remember(("source_features_sha", _stat_key(path), dtype), lambda: (
            _feature_sha(data["phi_q"], dtype), _feature_sha(data["phi_k"], dtype)))
        if shas != (fs.get("phi_q"), fs.get("phi_k")):
            return ["the embedded features are not the source file's features"], None
        cur = scratch.current()
        if cur is not None:                     # for the Gram summaries' re-derivation (verify)
            cur.put(source_features_key(dtype, *shas), {"phi_q": data["phi_q"], "phi_k": data["phi_k"]})
        return [], None
    return ["the source file does not hold what the claim's evidence describes"], None


def extraction_id(claim: Mapping[str, Any], cert: Mapping[str, Any], base: "Base") -> str | None:
    """The extraction a claim's replay must run, by content, never by name: the sha256 of
    the canonical JSON of the source's sha256 (a construction, which has none, by its
    spec: the spec is the content), where its file resolves from the certificate's folder
    (the files beside it, such as a config, are read from there), the sha256 of every file
    the certificate lists as an input, the adapter, the token set and the stated kernel
    arguments. Two certificates whose sources share a relative name but not their bytes
    get different replays; None when the claim names no source."""
    p = claim.get("parameters") or {}
    if not isinstance(p, Mapping) or not isinstance(p.get("source"), str):
        return None
    sha = p.get("source_sha256")
    path = find(p["source"], base) if isinstance(sha, str) else None
    raw_inputs = cert.get("inputs")
    inputs = raw_inputs if isinstance(raw_inputs, Mapping) else {}
    ident = {"source_sha256": sha if isinstance(sha, str) else None,
             "spec": None if isinstance(sha, str) else p["source"],
             "path": os.path.realpath(path) if path is not None else None,
             "inputs": sorted(str(v) for v in inputs.values()),
             "adapter": p.get("adapter"), "token_set": p.get("token_set"), "stated": p.get("stated"),
             "sequences_sha256": p.get("sequences_sha256")}
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()


def refused_source(certs: Sequence[tuple[str, Mapping[str, Any], Base]]) -> str | None:
    """The one line ``certify verify`` refuses with (exit 2, before any claim is checked) when a
    claim's matrix file is present, is the one certified (its sha256 is the claim's) and holds
    numbers not read exactly here (:class:`InexactSource`: longdouble, complex, object,
    datetime, strings, structured, NaN or Inf, empty); None when there is none."""
    for name, cert, base in certs:
        for c in cert.get("claims") or []:
            p = c.get("parameters") if isinstance(c, Mapping) else None
            if not isinstance(p, Mapping) or p.get("adapter") != "matrix-file" \
                    or not isinstance(p.get("source"), str) or not str(p["source"]).lower().endswith(MATRIX_SUFFIXES):
                continue
            path = find(p["source"], base)
            try:
                if path is None or path.stat().st_size > MAX_SOURCE_BYTES or sha256_file(path) != p.get("source_sha256"):
                    continue
                read_source(path)
            except InexactSource as exc:
                return f"{name}: the source {p['source']} is refused: {exc}"
            except (SourceError, OSError):
                continue
    return None


def replay_keys(claim: Mapping[str, Any], cert: Mapping[str, Any] | None = None,
                base: "Base" = None) -> list[str]:
    """The objects an extraction replay must reproduce for this claim, each a key of
    :func:`replay_extraction`'s result: the features' hashes (a kernel claim), the
    head tables' hash on its family and the weights' canonical hash (a head claim),
    each prefixed by the extraction's content identity (:func:`extraction_id`), so that a
    claim is discharged only by the replay of its own source. Empty when the claim's
    evidence names nothing a replay could compare."""
    p, ev = claim.get("parameters") or {}, claim.get("evidence") or {}
    if not isinstance(p, Mapping) or not isinstance(ev, Mapping) or not isinstance(p.get("source"), str):
        return []
    src = extraction_id(claim, cert if cert is not None else {}, base)
    out = []
    fs = ev.get("features_sha256")
    if isinstance(fs, Mapping) and isinstance(fs.get("phi_q"), str) and isinstance(fs.get("phi_k"), str):
        out.append(f"features\0{src}\0{fs['phi_q']}\0{fs['phi_k']}")
    if isinstance(p.get("head_sha256"), str) and isinstance(p.get("family"), str):
        out.append(f"head\0{src}\0{p['family']}\0{p['head_sha256']}")
    if isinstance(p.get("weights_sha256"), str):
        out.append(f"weights\0{src}\0{p['weights_sha256']}")
    return out


def measured_rows(path: Path) -> int | None:
    """The token (row) count of a present matrix or features file, as read."""
    try:
        data = _read_once(path)
    except SourceError:
        return None
    a = data.get("phi_q", data.get("matrix"))
    if isinstance(a, np.ndarray):
        return int(a.shape[0]) if a.ndim == 2 else None
    return len(a) if isinstance(a, list) else None


def bind(claim: Mapping[str, Any], cert: Mapping[str, Any], base: "Base",
         replayed: Mapping[str, str]) -> tuple[list[str], list[str], Any, int | None]:
    """(problems, assumptions, exact integer matrix for the checker or None, the
    row count of the source as re-read here or None) of a claim's source. Every
    claim with a source is bound: a file by its hash (re-read when present), an
    extraction by a replay that compares the claim's own evidence."""
    p = claim["parameters"]
    source, sha, adapter = p["source"], p.get("source_sha256"), p.get("adapter")
    inputs = cert.get("inputs") or {}
    problems: list[str] = []
    if sha is None and adapter == "memory":
        from certify.checkers.common import embedded_kernel_sha
        if source != "memory" or embedded_kernel_sha(claim) is None:
            return ["a kernel built in memory (adapter 'memory') must be named 'memory' and embed "
                    "its features or matrix (nothing else binds it)"], [], None, None
        return [], [], None, None
    if sha is None and adapter != "construction":
        return [f"the source {source!r:.80} has no sha256: only a construction ('construction' "
                "adapter) or embedded data ('memory') is named without one"], [], None, None
    if sha is not None and inputs.get(source) != sha:
        problems.append(f"the certificate's inputs do not list the source {source!r:.80} with "
                        f"the claim's sha256")
    if adapter == "matrix-file":
        found = locate(source, sha, base)
        if found is None:
            return problems, [f"source:{source}"], None, None
        path = found.path
        if path.stat().st_size > MAX_SOURCE_BYTES:
            return problems, [f"source:{source} (too large to re-read here)"], None, None
        if sha256_file(path) != sha:
            return problems + [f"the source file {path} is not the one certified (sha256 "
                               "differs)"], [], None, None
        try:
            bad, matrix = _bind_matrix_file(claim, path)
        except InexactSource as exc:               # the certified file, holding what no claim binds
            return problems + [f"the source file {path} cannot hold the certified matrix: {exc}"], [], None, None
        except NotTheMatrix as exc:                # the certified file, holding another matrix
            return problems + [f"the source file {path}: {exc}"], [], None, None
        except SourceError as exc:
            return problems, [f"source:{source} ({exc})"], None, None
        return problems + bad, [], matrix, measured_rows(path)
    wanted = replay_keys(claim, cert, base)
    if not wanted:
        return problems + [f"nothing in the claim can be compared with an extraction of "
                           f"{source!r:.80} (no features, head or weights hash)"], [], None, None
    statuses = [replayed.get(k) for k in wanted]
    differs = [s for s in statuses if isinstance(s, str) and s.startswith("differs")]
    if differs:
        return problems + [f"extraction replay of {source}: {differs[0]}"], [], None, None
    if statuses and all(s == "match" for s in statuses):
        return problems, [], None, None
    why = next((s for s in statuses if s is not None and s != "match"), None)
    return problems, [f"extraction:{source}" + (f" ({why})" if why else "")], None, None


# ---------------------------------------------------------------- replay

def _die_with_parent() -> None:
    """In the replay child: be killed when verify (or a service worker) dies."""
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

class Replayed(dict):
    """``comparison key -> status`` of :func:`replay_extraction`, and where the replayed
    features of kernels whose claims trust summaries were written
    (``features``: :func:`features_key` -> ``.npz`` path, in a temporary folder
    that lives as long as this object), so that the checker recomputes those
    summaries itself (:func:`certify.checkers.gram.summary_problems`); ``used``:
    the files the replay read (input name -> :class:`Found`), ``missing``: source ->
    the one line saying where its files were looked for and what to pass."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.features: dict[str, str] = {}
        self.folder: Any = None                 # a TemporaryDirectory, removed with this object
        self.used: dict[str, Found] = {}
        self.missing: dict[str, str] = {}


#: file names a model's loader reads beside its weights (the config, a shard index)
_MODEL_SUFFIXES = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")


def _parent(name: str) -> str:
    return name.rsplit("/", 1)[0] if "/" in name else ""


def model_files(source: str, inputs: Mapping[str, Any]) -> list[str]:
    """The certificate's inputs a replay of ``source`` reads: the source and, in its
    folder, the weights files, shards, shard index and configs (``config.json``,
    ``X.config.json``, a ``models/`` checkpoint's ``X.json``)."""
    par, stem = _parent(source), Path(source).stem
    out = [source]
    for n in inputs:
        if n == source or not isinstance(n, str) or n.startswith("family:") or _parent(n) != par:
            continue
        leaf = n.rsplit("/", 1)[-1]
        if leaf.endswith((*_MODEL_SUFFIXES, "config.json", ".index.json")) or Path(leaf).stem == stem:
            out.append(n)
    return out


def _stage(source: str, inputs: Mapping[str, Any], base: "Base", result: Replayed,
           folders: list[Any]) -> tuple[str | None, str | None]:
    """``(path the replay reads, None)`` or ``(None, why not)``: every file of the
    model (:func:`model_files`) located by its sha256 (:func:`locate`); when one
    was found elsewhere than as named, the replay reads a private folder of links
    named as the certificate names them, to those files, checked."""
    import tempfile
    names = model_files(source, inputs)
    found = {n: locate(n, inputs.get(n), base) for n in names}
    for n, f in found.items():
        if f is None or not f.matches:
            result.missing.setdefault(source, not_found_hint(n, base))
            return None, "not present: the model's files are not found by their sha256"
    result.used.update({n: f for n, f in found.items() if f is not None})
    if all(f is not None and f.how == "as named" for f in found.values()):
        f0 = found[source]
        return (str(f0.path) if f0 is not None else None), None
    folder = tempfile.TemporaryDirectory(prefix="certify-weights-")
    folders.append(folder)
    for n, f in found.items():
        if f is not None:
            os.symlink(os.path.realpath(f.path), Path(folder.name) / n.rsplit("/", 1)[-1])
    return str(Path(folder.name) / source.rsplit("/", 1)[-1]), None


def features_key(claim: Mapping[str, Any], cert: Mapping[str, Any], base: "Base") -> str | None:
    """The replay job whose features a factor-form claim's summaries are re-derived from:
    its extraction's content identity (:func:`extraction_id`)."""
    return extraction_id(claim, cert, base)


def _ask_features(jobs: Mapping[str, dict[str, Any]], wanted: set[str]) -> Any:
    """Ask the replay to write the features of the jobs in ``wanted`` to files (a
    temporary folder, returned); None when no claim trusts a summary."""
    import tempfile
    if not wanted:
        return None
    folder = tempfile.TemporaryDirectory(prefix="certify-replay-")
    for key in wanted:
        jobs[key]["features_out"] = str(Path(folder.name) / (hashlib.sha256(key.encode()).hexdigest() + ".features"))
    return folder


#: adapters whose features are canonical (``models.canonical``) or exact: torch computes none of them
CANONICAL_ADAPTERS = ("layout:", "adapter:", "models.checkpoint", "construction")


def _torch_decides(job: Mapping[str, Any]) -> bool:
    """Whether the torch version decides a replay: only for a source whose features
    torch computes. None of the replayable ones does: third-party heads
    (``layout:...``, ``adapter:...``) and ``models/`` checkpoints
    (``models.checkpoint``) are replayed through the canonical extraction
    (float64, fixed order, correctly rounded functions), constructions
    (``construction``) are exact dyadic tables rounded once by Python's
    ``float(Fraction)``; neither result depends on torch, the CPU or the BLAS."""
    adapter = str(job.get("adapter") or "")
    return job.get("torch") is not None and not adapter.startswith(CANONICAL_ADAPTERS)


def replay_extraction(certs: Sequence[tuple[str, Mapping[str, Any], "Base"]]) -> Replayed:
    """Re-run the weights -> features step of every checkpoint / construction
    source in a separate process (``certify.cli.replay``, torch, one thread).
    Its files are found by their sha256 (:func:`locate`: as named, beside the
    certificate, in the Hugging Face cache, under ``--weights``; ``used`` and
    ``missing`` of the result say which and where).

    Each job states the exact objects it must reproduce (:func:`replay_keys` of the
    claims it serves: features' hashes, head tables' hashes, weights' hashes); a
    job with nothing to compare is not run. Returns comparison key -> "match" |
    "differs: ..." | a reason the replay could not decide; a claim is discharged
    only by the keys of its own evidence (:func:`bind`)."""
    # the files located for the replay are hashed once for this call, in a scratch of its own
    with scratch.session():
        return _replay_extraction(certs)


def _replay_extraction(certs: Sequence[tuple[str, Mapping[str, Any], "Base"]]) -> Replayed:
    jobs: dict[str, dict[str, Any]] = {}
    wanted: set[str] = set()                 # kernels whose claims trust summaries: their features go to a file
    result = Replayed()
    staged: list[Any] = []                   # folders of links to files found elsewhere than as named
    absent: dict[str, str] = {}              # job key -> why its files are not there
    located: dict[tuple[int, str], tuple[str | None, str | None]] = {}   # (certificate, source) -> _stage
    for i, (_, cert, base) in enumerate(certs):
        env = (cert.get("environment") or {}).get("packages") or {}
        raw_inputs = cert.get("inputs")
        inputs: dict[str, Any] = raw_inputs if isinstance(raw_inputs, dict) else {}
        for c in cert["claims"]:
            p, ev = c.get("parameters") or {}, c.get("evidence") or {}
            if not isinstance(p, dict) or not isinstance(ev, dict) \
                    or not isinstance(p.get("source"), str) \
                    or p.get("adapter") in (None, "matrix-file") or not replay_keys(c, cert, base):
                continue
            fs, head = ev.get("features_sha256"), p.get("head_sha256")
            src = p["source"]
            if (i, src) not in located:
                located[(i, src)] = (None, None) if p.get("adapter") == "construction" else \
                    _stage(src, inputs, base, result, staged)
            path, why = located[(i, src)]
            # one job per extraction, by content (extraction_id): a source (a checkpoint's
            # weights) may hold many heads; claims stating different kernel arguments of one
            # head are different kernels; two sources that share a name are two jobs
            key = extraction_id(c, cert, base)
            assert key is not None
            sha = p.get("source_sha256")
            seq_path, seq_why = _sequences_file(p, inputs, base)
            missing = why if why is not None else seq_why
            if missing is not None:
                absent[key] = missing
            job = jobs.setdefault(key, {"key": key, "source": src, "path": path,
                                        # the worker refuses a file whose bytes are not these
                                        "source_sha256": sha if isinstance(sha, str) else None,
                                        "adapter": p.get("adapter"), "token_set": None,
                                        "dtype": None, "torch": env.get("torch"),
                                        # a third-party head's stated kernel arguments (re-derived)
                                        "stated": p.get("stated"),
                                        # the sequences of a positions:SxT token set: the worker re-reads
                                        # (or regenerates) the ids and compares their content hash
                                        "sequences": p.get("sequences"), "sequences_path": seq_path,
                                        "sequences_sha256": p.get("sequences_sha256"),
                                        "want": [], "heads": [], "weights": [], "compare": [],
                                        # an adapter spec is one of the certificate's inputs
                                        "specs": [str(f.path) for f in (locate(n, inputs.get(n), base)
                                                                        for n in inputs
                                                                        if str(n).endswith(".json"))
                                                  if f is not None and f.matches]
                                        if str(p.get("adapter")).startswith("adapter:") else []})
            # a head without a denominator has the features of the normalized one: whether it is
            # normalized is re-derived by the replay from the config, every value its claims give
            norm = p.get("normalized", True)
            if norm not in job.setdefault("normalized", []):
                job["normalized"].append(norm)
            if isinstance(fs, dict) and isinstance(fs.get("phi_q"), str):
                job["token_set"], job["dtype"] = p.get("token_set"), fs.get("dtype")
                job["want"].append([fs.get("phi_q"), fs.get("phi_k")])
                if "trusted" in ev:
                    wanted.add(key)
            if isinstance(head, str) and isinstance(p.get("family"), str):
                job["heads"].append([p["family"], head])
            if isinstance(p.get("weights_sha256"), str):
                job["weights"].append(p["weights_sha256"])
            job["compare"] += [k for k in replay_keys(c, cert, base) if k not in job["compare"]]
    jobs = {k: j for k, j in jobs.items() if j["compare"]}      # an empty comparison is no replay
    for key in [k for k in jobs if k in absent]:                 # nothing to run: its files are not here
        result.update({c: absent[key] for c in jobs.pop(key)["compare"]})
    try:
        return _run_replay(jobs, wanted, result)
    finally:
        for f in staged:
            f.cleanup()


def _sequences_file(p: Mapping[str, Any], inputs: Mapping[str, Any],
                    base: "Base") -> tuple[str | None, str | None]:
    """``(path, None)`` of the sequences file a claim names (located by its sha256 among the
    certificate's inputs), ``(None, None)`` for none or the seeded probe (the worker
    regenerates it), ``(None, why)`` when the file is not found."""
    name = p.get("sequences")
    if not isinstance(name, str) or name.startswith("random:"):
        return None, None
    f = locate(name, inputs.get(name), base)
    if f is None or not f.matches:
        return None, f"not present: the sequences file {name[:80]} is not found by its sha256"
    return str(f.path), None


def _run_replay(jobs: dict[str, dict[str, Any]], wanted: set[str], result: Replayed) -> Replayed:
    if not jobs:
        return result
    folder = _ask_features(jobs, wanted)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    send = [{k: v for k, v in j.items() if k != "compare"} for j in jobs.values()]
    import subprocess
    try:
        out = subprocess.run([sys.executable, "-m", "certify.cli.replay"],
                             input=json.dumps(send), capture_output=True,
                             text=True, timeout=600, env=env, preexec_fn=_die_with_parent)
    except (OSError, subprocess.SubprocessError) as exc:
        result.update({k: f"replay could not run: {type(exc).__name__}" for j in jobs.values()
                       for k in j["compare"]})
        return result
    try:
        got = json.loads(out.stdout)
    except json.JSONDecodeError:
        line = (out.stderr.strip().splitlines() or ["no output"])[-1]
        result.update({k: f"replay failed: {line[:160]}" for j in jobs.values()
                       for k in j["compare"]})
        return result
    result.folder = folder
    for key, job in jobs.items():
        r = got.get(key) if isinstance(got, dict) else None
        r = r if isinstance(r, dict) else {"error": "no result for this job"}
        for k in job["compare"]:
            what, _, rest = k.partition("\0")
            parts = rest.split("\0")
            if "error" in r:
                status = f"replay failed: {str(r['error'])[:200]}"
            elif _torch_decides(job) and r.get("torch") != job["torch"]:
                status = f"torch {r.get('torch')} here, {job['torch']} in the certificate"
            elif what == "features":
                status = "match" if [r.get("phi_q"), r.get("phi_k")] == parts[-2:] else \
                    "differs: the replayed features' sha256 is not the certificate's"
            elif what == "head":
                status = "match" if (r.get("heads") or {}).get(parts[-2]) == parts[-1] else \
                    "differs: the replayed head's tables hash is not the certificate's"
            else:
                status = "match" if r.get("weights_sha256") == parts[-1] else \
                    "differs: the replayed weights' canonical hash is not the certificate's"
            result[k] = status
        # the replayed features, for the checker to recompute trusted summaries from (it
        # re-hashes the file against each claim's own features_sha256 first)
        if "error" not in r and job.get("features_out") and r.get("features_file") == job["features_out"]:
            result.features[key] = job["features_out"]
    return result
