"""The canonical weights hash of a loaded tensor set (torch or numpy), the
same function :mod:`certify.checkers.tensors` computes from a safetensors file:
a model is named by this hash, whatever file or nesting held its weights."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from certify.checkers.tensors import tensor_set_sha256

_TORCH_NAMES = {"float64": "float64", "float32": "float32", "float16": "float16",
                "bfloat16": "bfloat16", "int64": "int64", "int32": "int32", "int16": "int16",
                "int8": "int8", "uint8": "uint8", "bool": "bool"}


def _entry(name: str, t: Any) -> tuple[str, str, tuple[int, ...], bytes]:
    if hasattr(t, "detach"):                                   # a torch tensor
        dtype = str(t.dtype).replace("torch.", "")
        if dtype not in _TORCH_NAMES:
            raise ValueError(f"tensor {name}: dtype {dtype} has no canonical name")
        c = t.detach().cpu().contiguous()
        if dtype == "bfloat16":                                # numpy has no bfloat16
            import torch
            raw = c.view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            a = c.numpy()
            raw = a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        return name, _TORCH_NAMES[dtype], tuple(int(d) for d in c.shape), raw
    a = np.ascontiguousarray(np.asarray(t))
    if a.dtype.name not in _TORCH_NAMES:
        raise ValueError(f"tensor {name}: dtype {a.dtype} has no canonical name")
    return name, a.dtype.name, tuple(int(d) for d in a.shape), \
        a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def weights_sha256(tensors: Mapping[str, Any]) -> str:
    """sha256 of the canonical tensor set (sorted names, dtype, shape, bytes)."""
    return tensor_set_sha256(_entry(str(k), v) for k, v in tensors.items())
