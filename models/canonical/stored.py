"""A stored tensor read lazily: its name, dtype and shape first, its bytes only
when a value is needed.

Layout detection (:func:`models.layouts.detect`) reads names and shapes only;
the weights of the layer that is certified (and the embedding it reads) are
read when its features are computed, each slice once, and decoded once
(:func:`models.canonical.arith.decode`: bf16 is the high half of a float32,
fp16 is decoded from its fields; every value is exact). No torch is needed:
:meth:`Weight.numpy64` is what the canonical path reads, :meth:`Weight.torch`
is the torch view of the same values for the library check and the torch
twins of the maps (float32 for half precision, as the libraries compute).

A :class:`Weight` is sliced along its first axis only (a head's rows); the
slice reads only its own rows.

>>> w = Weight("w", "float32", (2, 2), lambda lo, hi: bytes(range(16))[lo:hi])
>>> w[1:].shape
(1, 2)
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

#: bytes per element of the dtypes a weight may have
ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
            "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
            "float8_e4m3fn": 1, "float8_e5m2": 1}
HALF = ("bfloat16", "float16")


class Weight:
    """A tensor of a weights file, read on demand. ``read(lo, hi)`` returns the
    bytes ``[lo, hi)`` of the whole stored tensor; ``lo`` is where this view's
    first row starts."""

    __slots__ = ("name", "dtype", "shape", "_read", "_lo", "_f64", "_torch", "derived")

    def __init__(self, name: str, dtype: str, shape: tuple[int, ...], read: Callable[[int, int], bytes],
                 lo: int = 0) -> None:
        self.name, self.dtype, self.shape = name, dtype, tuple(int(s) for s in shape)
        self._read, self._lo = read, lo
        self._f64: np.ndarray | None = None
        self._torch: Any = None
        #: values computed from this weight and kept with it (the embedding after a layer's
        #: pre-norm, shared by the layer's heads: :meth:`models.layouts.base.FeatureHead.canonical_features`)
        self.derived: dict[Any, np.ndarray] = {}

    # -- shape only (no bytes are read) --
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d weight")
        return self.shape[0]

    @property
    def nbytes(self) -> int:
        return self.numel() * ITEMSIZE[self.dtype]

    def __repr__(self) -> str:
        return f"Weight({self.name!r}, {self.dtype}, {self.shape})"

    def __getitem__(self, key) -> "Weight":
        """Rows ``a:b`` (step 1) of the first axis, as a weight that reads only them."""
        if not isinstance(key, slice) or key.step not in (None, 1) or not self.shape:
            raise TypeError(f"{self.name}: a stored weight is sliced along its first axis only, got {key!r}")
        a, b, _ = key.indices(self.shape[0])
        b = max(a, b)
        row = math.prod(self.shape[1:]) * ITEMSIZE[self.dtype]
        return Weight(f"{self.name}[{a}:{b}]", self.dtype, (b - a, *self.shape[1:]), self._read,
                      self._lo + a * row)

    # -- values (read and decoded once) --
    def raw(self) -> bytes:
        """This view's bytes as stored (row-major, little-endian)."""
        return self._read(self._lo, self._lo + self.nbytes)

    def numpy64(self) -> np.ndarray:
        """The values as ``float64``, exactly (decoded once, then kept)."""
        if self._f64 is None:
            from models.canonical.arith import decode
            a = decode(self.raw(), self.dtype, self.shape)
            a.setflags(write=False)
            self._f64 = a
        return self._f64

    def release(self) -> None:
        """Drop the kept float64 decoding and torch tensor (a later :meth:`numpy64` or
        :meth:`torch` makes them again): a whole vocabulary's embedding kept as float32 for
        the library check is hundreds of MB that the canonical features never read."""
        self._f64 = None
        self._torch = None

    def numpy(self) -> np.ndarray:
        """The values as the library computes with them (what a torch tensor's
        ``.numpy()`` gives): float32 for bf16/fp16/float32 (every such value is a
        float32), float64 for float64, integers as stored; decoded from the bytes,
        no torch."""
        raw = self.raw()
        if self.dtype == "bfloat16":                   # the high half of a float32: exact
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << np.uint32(16)).view("<f4")
        elif self.dtype == "float16":                  # every fp16 value is a float32: exact
            a = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif self.dtype == "bool":
            a = np.frombuffer(raw, dtype="?").copy()
        elif self.dtype in ITEMSIZE and not self.dtype.startswith("float8"):
            a = np.frombuffer(raw, dtype=np.dtype(self.dtype).newbyteorder("<")).astype(self.dtype)
        else:
            raise ValueError(f"{self.name}: dtype {self.dtype} has no array view here")
        return np.ascontiguousarray(a.reshape(self.shape))

    def torch(self, keep: bool = True):
        """The values as a torch tensor (:meth:`numpy`'s array); ``keep``: kept for
        the next call (the torch twins of a head's maps), or not (a whole state dict
        handed to the library's module, which copies it)."""
        if self._torch is not None:
            return self._torch
        import torch
        t = torch.from_numpy(self.numpy())
        if keep:
            self._torch = t
        return t
