"""The one weight reader: a checkpoint path -> the tensors as stored, and what was found.

Every command that reads a model's weights (``rank``, ``extract``,
``checkpoint``, the replay of ``verify --replay-extraction``, the service's
jobs) calls :func:`read_weights`. It takes

* a ``.safetensors`` file (parsed here with the standard library: its header
  is checked before any data is touched, no torch needed; a tensor's bytes
  are read only when asked for);
* a torch file (``.pt``, ``.pth``, ``.bin``, ``.ckpt``), read with
  ``torch.load(weights_only=True)``: pickled code never runs;
* a folder: ``model.safetensors``, sharded safetensors
  (``model.safetensors.index.json`` naming each tensor's shard),
  ``pytorch_model.bin`` (or its sharded index), or a single weights file;
* an index file ``*.safetensors.index.json`` itself.

Training checkpoints are unwrapped: a dict whose tensors sit under
``"model"``, ``"state_dict"``, ``"module"``, ``"model_state_dict"`` or
``"ema"`` (in that order of preference, nested at most four deep) is read at
that key; the other entries (optimizer state, step counters, EMA copies when
the model itself is present) are listed as ignored, never read as layers.

The result is a :class:`WeightSet`: name -> :class:`StoredTensor` (dtype name,
shape, row-major little-endian bytes exactly as stored: bf16 stays bf16), the
files read, the nesting keys walked and the entries ignored. A canonical hash
of a model can be computed from it without torch (sorted names, dtypes,
shapes, bytes); :meth:`WeightSet.lazy` gives the tensors as
:class:`models.canonical.stored.Weight` handles for layout detection and the
canonical extraction (names and shapes first, bytes read on demand, no
torch); :meth:`WeightSet.torch` gives torch tensors in the stored dtype.

Bad files are one-line :class:`~certify.core.errors.InputError`\\ s (exit 2).
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from certify.core.errors import InputError

#: safetensors dtype codes -> dtype names (torch's names without ``torch.``)
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                      "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                      "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
                      "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
            "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
            "float8_e4m3fn": 1, "float8_e5m2": 1}
#: keys under which training checkpoints keep the model's tensors, in order of preference
NESTING_KEYS = ("model", "state_dict", "module", "model_state_dict", "ema")
#: torch weight files
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
#: file names of a model folder's weights, in the order they are looked for
FOLDER_WEIGHTS = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                  "pytorch_model.bin", "model.pt", "model.pth")
MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as stored: dtype name, shape, row-major little-endian bytes.

    The bytes are held (``raw``: a torch file, read whole) or read from
    ``file`` at ``offset`` when asked for (a safetensors file: only the
    tensors a computation needs are read, see :meth:`read`)."""

    dtype: str
    shape: tuple[int, ...]
    raw: bytes | None = None
    file: Path | None = None
    offset: int = 0
    stamp: tuple[int, int] | None = None        # the file's (size, mtime_ns) when its header was read

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ITEMSIZE[self.dtype]

    @property
    def data(self) -> bytes:
        """Every byte of the tensor."""
        return self.read(0, self.nbytes)

    def read(self, lo: int, hi: int) -> bytes:
        """The bytes ``[lo, hi)`` of the tensor (read from the file when not held)."""
        if not 0 <= lo <= hi <= self.nbytes:
            raise ValueError(f"bytes [{lo}, {hi}) of a {self.nbytes}-byte tensor")
        if self.raw is not None:
            return self.raw[lo:hi]
        if self.file is None:
            raise ValueError("a stored tensor without bytes or a file")
        with open(self.file, "rb") as fh:
            st = os.fstat(fh.fileno())
            if self.stamp is not None and (st.st_size, st.st_mtime_ns) != self.stamp:
                raise InputError(f"{self.file.name} changed while it was read (its size or time differs from "
                                 f"when its header was read)")
            fh.seek(self.offset + lo)
            got = fh.read(hi - lo)
        if len(got) != hi - lo:
            raise InputError(f"{self.file.name} changed while it was read (a tensor's bytes are missing)")
        return got


@dataclass(frozen=True)
class WeightSet:
    """The tensors read from a checkpoint and what was found on the way."""

    tensors: Mapping[str, StoredTensor]
    files: tuple[Path, ...]                 # every file read, in order
    nesting: tuple[str, ...] = ()           # keys walked into a training checkpoint
    ignored: tuple[str, ...] = ()           # entries beside the tensors, not read
    fmt: str = "safetensors"                # safetensors | torch

    @property
    def dtypes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors.values():
            out[t.dtype] = out.get(t.dtype, 0) + 1
        return out

    def lazy(self) -> dict[str, Any]:
        """name -> :class:`models.canonical.stored.Weight`: names, dtypes and shapes
        now, the bytes of a tensor (or of the rows of it that are sliced) only when
        its values are asked for. No torch is needed."""
        from models.canonical.stored import Weight
        return {name: Weight(name, t.dtype, t.shape, t.read) for name, t in self.tensors.items()}

    def torch(self) -> dict[str, Any]:
        """name -> torch tensor in its stored dtype (CPU)."""
        import torch
        out = {}
        for name, t in self.tensors.items():
            dt = getattr(torch, t.dtype, None)
            if dt is None:
                raise InputError(f"tensor {name!r}: dtype {t.dtype} is not known to this torch")
            if t.numel == 0:
                out[name] = torch.empty(t.shape, dtype=dt)
            else:
                out[name] = torch.frombuffer(bytearray(t.data), dtype=dt).reshape(t.shape)
        return out

    def describe(self) -> dict[str, Any]:
        """What was read, for provenance and messages (JSON)."""
        return {"files": [str(f) for f in self.files], "format": self.fmt, "nesting": list(self.nesting),
                "ignored": list(self.ignored)[:20], "tensors": len(self.tensors), "dtypes": self.dtypes}


# ---------------------------------------------------------------- entry point

def weights_file(path: str | Path) -> Path:
    """The file that holds (or indexes) a checkpoint's weights: the path itself,
    or a folder's weights file (:data:`FOLDER_WEIGHTS`, else its one weights file)."""
    p = Path(path)
    if p.is_file():
        return p
    if not p.exists():
        raise InputError(f"no such checkpoint: {path}")
    if not p.is_dir():
        raise InputError(f"{path} is neither a file nor a folder")
    for name in FOLDER_WEIGHTS:
        if (p / name).is_file():
            return p / name
    cands = sorted(c for c in p.iterdir() if c.is_file() and (c.suffix in (".safetensors",) + TORCH_SUFFIXES))
    if len(cands) == 1:
        return cands[0]
    if cands:
        raise InputError(f"{path} holds {len(cands)} weight files ({', '.join(c.name for c in cands[:4])}); "
                         f"name one, or keep one model per folder")
    raise InputError(f"{path} is a folder without weights (a model folder holds config.json and "
                     f"model.safetensors, a sharded model.safetensors.index.json, or pytorch_model.bin)")


def read_weights(path: str | Path) -> WeightSet:
    """Every tensor of the checkpoint at ``path`` (file, folder or shard index),
    as stored; see the module docstring."""
    f = weights_file(path)
    if f.name.endswith(".index.json"):
        return _read_sharded(f)
    if f.suffix == ".safetensors":
        return WeightSet(_read_safetensors(f), (f,), fmt="safetensors")
    if f.suffix in TORCH_SUFFIXES:
        tensors, nesting, ignored = _read_torch(f)
        return WeightSet(tensors, (f,), nesting, ignored, fmt="torch")
    raise InputError(f"{f.name}: not a weights file (.safetensors, {', '.join(TORCH_SUFFIXES)}, "
                     f"or a *.safetensors.index.json of shards)")


# ---------------------------------------------------------------- safetensors (no torch)

def safetensors_header(path: Path) -> tuple[dict[str, Any], int]:
    """``(header, data offset)`` of a safetensors file, checked: every tensor's
    byte range lies in the file and matches its dtype and shape."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise InputError(f"{path.name} is not a readable safetensors file (truncated header)")
        n = struct.unpack("<Q", head)[0]
        if n > min(size - 8, MAX_HEADER):
            raise InputError(f"{path.name} is not a readable safetensors file (header length {n} "
                             f"beyond the file)")
        try:
            meta = json.loads(fh.read(n))
        except (ValueError, RecursionError):
            raise InputError(f"{path.name} is not a readable safetensors file (header is not JSON)") from None
    if not isinstance(meta, dict):
        raise InputError(f"{path.name} is not a readable safetensors file (header is not an object)")
    data_len = size - 8 - n
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        try:
            dtype = SAFETENSORS_DTYPES[info["dtype"]]
            shape = tuple(int(s) for s in info["shape"])
            a, b = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{path.name} is not a readable safetensors file (entry {name!r:.60} "
                             f"has an unknown dtype or a bad shape)") from None
        if any(s < 0 for s in shape) or not 0 <= a <= b <= data_len \
                or b - a != math.prod(shape) * ITEMSIZE[dtype]:
            raise InputError(f"{path.name} is not a readable safetensors file (tensor {name!r:.60} "
                             f"lies outside the file or does not match its shape)")
    return meta, 8 + n


def _read_safetensors(path: Path) -> dict[str, StoredTensor]:
    """The file's tensors from its header alone: each reads its bytes when asked.
    The format's own reader (the ``safetensors`` package, the ``[replay]`` extra)
    must see the same names, dtypes and shapes (:func:`_same_as_safetensors`)."""
    st = path.stat()
    meta, off = safetensors_header(path)
    _same_as_safetensors(path, meta)
    out = {}
    for name, info in meta.items():
        if name == "__metadata__":
            continue
        a, _ = info["data_offsets"]
        out[name] = StoredTensor(SAFETENSORS_DTYPES[info["dtype"]], tuple(int(s) for s in info["shape"]),
                                 file=path, offset=off + int(a), stamp=(st.st_size, st.st_mtime_ns))
    return out


def _same_as_safetensors(path: Path, meta: Mapping[str, Any]) -> None:
    """The names, dtypes and shapes of the header as the safetensors package reads
    them (``safe_open(..., framework="numpy")``: the header only, no tensor is
    converted) equal the ones parsed here; a file it refuses is refused."""
    from safetensors import safe_open
    try:
        with safe_open(str(path), framework="numpy") as f:
            got = {}
            for name in f.keys():
                sl = f.get_slice(name)
                got[name] = (str(sl.get_dtype()), tuple(int(d) for d in sl.get_shape()))
    except Exception as exc:   # safetensors raises its own error types for files it refuses
        first = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise InputError(f"{path.name} is not a readable safetensors file (safetensors: {first})") from None
    ours = {name: (str(info["dtype"]), tuple(int(d) for d in info["shape"]))
            for name, info in meta.items() if name != "__metadata__"}
    if got != ours:
        diff = sorted(set(got) ^ set(ours)) or sorted(k for k in got if got[k] != ours.get(k))
        raise InputError(f"{path.name}: the safetensors package reads another header than this reader "
                         f"(tensor {diff[0]!r:.60} differs); not read")


def _read_sharded(index: Path) -> WeightSet:
    try:
        obj = json.loads(index.read_text())
    except (ValueError, RecursionError, UnicodeDecodeError):
        raise InputError(f"{index.name} is not JSON (a shard index maps tensor names to files)") from None
    wmap = obj.get("weight_map") if isinstance(obj, dict) else None
    if not isinstance(wmap, dict) or not wmap or not all(isinstance(v, str) for v in wmap.values()):
        raise InputError(f"{index.name}: no weight_map of tensor name -> shard file")
    shards = list(dict.fromkeys(wmap.values()))
    tensors: dict[str, StoredTensor] = {}
    files = [index]
    for s in shards:
        sp = index.parent / s
        if Path(s).is_absolute() or ".." in Path(s).parts or not sp.is_file():
            raise InputError(f"{index.name}: shard {s!r:.80} is not a file beside the index")
        if sp.suffix == ".safetensors":
            got = _read_safetensors(sp)
        else:
            got, _, _ = _read_torch(sp)
        files.append(sp)
        for name, t in got.items():
            if wmap.get(name) != s:
                raise InputError(f"{index.name}: tensor {name!r:.60} is in shard {s} but the index "
                                 f"places it in {wmap.get(name)!r}")
            tensors[name] = t
    missing = sorted(set(wmap) - set(tensors))
    if missing:
        raise InputError(f"{index.name}: tensors {missing[:3]} are indexed but in no shard")
    fmt = "safetensors" if all(s.endswith(".safetensors") for s in shards) else "torch"
    return WeightSet(tensors, tuple(files), fmt=fmt)


# ---------------------------------------------------------------- torch files

def _read_torch(path: Path) -> tuple[dict[str, StoredTensor], tuple[str, ...], tuple[str, ...]]:
    import pickle

    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        why = next((ln.strip() for ln in str(exc).splitlines() if "Unsupported" in ln), "")
        why = why.split(". ")[0] if why else "it holds code or objects other than tensors"
        raise InputError(f"{path.name} is a pickle that torch.load(weights_only=True) refuses "
                         f"({why}); pickled code never runs") from None
    except (RuntimeError, EOFError, OSError, ValueError, AttributeError, TypeError,
            IndexError, KeyError, struct.error) as exc:    # torch's unpickler trips on junk in many ways
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path.name} is not a readable torch weights file ({first[:160]})") from None
    obj, nesting, ignored = _unwrap(obj, path.name)
    out = {}
    for name, t in obj.items():
        if not isinstance(t, torch.Tensor):
            continue
        if t.is_sparse or t.is_quantized or t.is_complex():
            raise InputError(f"{path.name}: tensor {name!r:.60} is sparse, quantized or complex")
        dtype = str(t.dtype).removeprefix("torch.")
        if dtype not in ITEMSIZE:
            raise InputError(f"{path.name}: tensor {name!r:.60} has dtype {dtype}")
        flat = t.detach().contiguous().reshape(-1)
        data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
        out[name] = StoredTensor(dtype, tuple(int(s) for s in t.shape), raw=data)
    return out, nesting, ignored


def _unwrap(obj: Any, name: str) -> tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """The dict of named tensors inside a (training) checkpoint: ``(dict, keys
    walked, entries ignored)``."""
    import torch
    nesting: list[str] = []
    ignored: list[str] = []
    for _ in range(5):
        if not isinstance(obj, Mapping):
            raise InputError(f"{name} holds a {type(obj).__name__}, not a dict of named tensors")
        key = next((k for k in NESTING_KEYS if isinstance(obj.get(k), Mapping)), None)
        if key is None:
            tensors = {k for k, v in obj.items() if isinstance(v, torch.Tensor)}
            if not tensors or not all(isinstance(k, str) for k in tensors):
                raise InputError(f"{name} holds no named tensors (a state dict, or a training checkpoint "
                                 f"with its model under one of {', '.join(repr(k) for k in NESTING_KEYS)}); "
                                 f"found keys {sorted(map(str, obj))[:6]}")
            ignored += [".".join([*nesting, str(k)]) for k in obj if k not in tensors]
            return {k: obj[k] for k in obj if k in tensors}, tuple(nesting), tuple(ignored)
        ignored += [".".join([*nesting, str(k)]) for k in obj if k != key]
        nesting.append(key)
        obj = obj[key]
    raise InputError(f"{name}: tensors nested deeper than {' -> '.join(nesting)}")


# ---------------------------------------------------------------- configs

def read_config(weights: Path) -> tuple[dict[str, Any], Path | None]:
    """The config beside a weights file: ``X.config.json`` for ``X.<suffix>``,
    else the folder's ``config.json``; ``({}, None)`` when there is none."""
    stem = weights.name.split(".")[0]
    for c in (weights.with_name(stem + ".config.json"), weights.with_name("config.json")):
        if c.is_file():
            if c.stat().st_size > 16 << 20:
                raise InputError(f"{c} is over 16 MB, not a config")
            try:
                cfg = json.loads(c.read_text())
            except (ValueError, RecursionError, UnicodeDecodeError) as exc:
                raise InputError(f"{c} is not JSON ({' '.join(str(exc).split())[:80]})") from None
            if not isinstance(cfg, dict):
                raise InputError(f"{c} must hold a JSON object (the model's constructor arguments)")
            return cfg, c
    return {}, None

