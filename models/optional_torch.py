"""torch where it is installed, a clear error where it is not.

Layout detection and the canonical features (:mod:`models.canonical`) need no
torch: a reviewer with the checker and the ``[replay]`` extra replays a
safetensors checkpoint's features without it. torch is needed only by the torch
twins of each step and map (the library check, ``FeatureHead.feature_matrices``)
and by torch pickles. Those twins use ``torch`` and ``F`` from here, imported when first used: a
replay or a detection does not import torch even where it is installed, and
without torch a twin raises ``ModuleNotFoundError`` (name ``torch``, so the
command names the extra to install) when called, never when a layout is
detected.

:func:`tt` gives the torch view of a stored weight (:class:`~models.canonical.stored.Weight`);
:class:`TorchView` is a state dict of weights seen as torch tensors (the library's
own module loads it).
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable, Iterator, Mapping

from models.canonical.stored import Weight


class _Lazy:
    """A module imported when one of its attributes is first used: ``torch`` (or
    ``torch.nn.functional``) is not imported by detection or the canonical path,
    and where it is not installed, using it raises ``ModuleNotFoundError`` (name
    ``torch``)."""

    def __init__(self, module: str) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_module":      # pickling and copying probe dunders first
            raise AttributeError(name)
        return getattr(importlib.import_module(self._module), name)

    def __reduce__(self):
        """Pickled by name (a closure sent to a Ray worker refers to it): the worker imports on use."""
        return (_Lazy, (self._module,))


torch: Any = _Lazy("torch")
F: Any = _Lazy("torch.nn.functional")


def no_grad(fn: Callable) -> Callable:
    """``fn`` run under ``torch.no_grad()`` (decorating needs no torch)."""
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with torch.no_grad():
            return fn(*args, **kwargs)
    return run


def tt(t: Any) -> Any:
    """A stored weight as a torch tensor (a torch tensor or None as it is)."""
    return t.torch() if isinstance(t, Weight) else t


def dtype_name(t: Any) -> str:
    """A tensor's dtype name without ``torch.`` (a weight's or a torch tensor's)."""
    return str(t.dtype).removeprefix("torch.")


class TorchView(Mapping[str, Any]):
    """A state dict whose stored weights are read as torch tensors when looked up
    (not kept: the library's module copies what it loads)."""

    def __init__(self, sd: Mapping[str, Any]) -> None:
        self._sd = sd

    def __getitem__(self, key: str) -> Any:
        t = self._sd[key]
        return t.torch(keep=False) if isinstance(t, Weight) else t

    def __iter__(self) -> Iterator[str]:
        return iter(self._sd)

    def __len__(self) -> int:
        return len(self._sd)
