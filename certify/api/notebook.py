"""What a notebook needs, as plain values: load a kernel or certificate, certify
a kernel, verify, read the certified singular values as floats, plot them.

Every function here is a thin front over the library the commands use (the one
loader :func:`certify.sources.load.load_kernel`, :func:`certify.rank.run.certify_rank`,
the checker :func:`certify.checkers.verify.verify_certificate`); nothing is a
second implementation. Progress bars are ``tqdm.auto`` bars, drawn in a Jupyter
notebook with no terminal check (:func:`certify.core.progress.notebook_progress`).

Singular values: an ``eps_rank`` claim's evidence encloses each ``sigma_i^2`` in
an exact interval ``[lo, hi]`` (fractions, re-checked by ``verify``).
:func:`singular_values` returns them as :class:`SingularValue`: ``lower`` and
``upper`` floats rounded outward (``lower <= sigma_i <= upper`` holds for the
float values themselves: each is checked exactly against the fraction), a float
``value`` in between for plotting, and the exact ``sq_lower``/``sq_upper``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Mapping, Sequence

from certify.core.certificate import Certificate
from certify.core.errors import InputError
from certify.core.kernel import Kernel


def load_kernel(source: str | os.PathLike, *, tokens: str | None = None, spec: str | None = None,
                layer: int | None = None, head: int | None = None, seed: int = 0,
                assume: Sequence[str] = ()) -> Kernel:
    """Any source ``certify rank`` reads, as a :class:`~certify.core.kernel.Kernel`: a
    matrix or kernel file, a ``models/`` checkpoint, a third-party weights file or
    model folder (``layer``/``head`` pick a head), a hub id ``org/name[@revision]``
    from the local Hugging Face cache. ``kernel.matrix`` is its matrix as floats."""
    from certify.sources.hub import resolve
    from certify.sources.load import load_kernel as _load
    from certify.sources.paths import resolve_source

    hub = resolve(source)
    path = str(hub.path) if hub is not None else (str(source) if spec else str(resolve_source(source)))
    kernel = _load(path, tokens=tokens, spec=spec, layer=layer, head=head, seed=seed, assume=assume)
    return hub.rename_kernel(kernel) if hub is not None else kernel


def certify_kernel(kernel: Kernel, *, eps: Fraction | str | None = "1/1000", code: str | None = None,
                   seed: int = 0, require_nonnegative: bool = False, progress: bool | None = None,
                   command: Sequence[str] = ()) -> Certificate:
    """Exact rank, certified eps-rank (``eps``; None: none), code rank, nonnegativity
    of a loaded kernel, as ``certify rank`` writes them (self-checked on output)."""
    from certify.api import _exact_positive
    from certify.core.progress import notebook_progress
    from certify.rank import run as _rank
    from certify.sources.load import annotate

    words, code_name = _rank.load_code(code) if code else (None, None)
    opt = _rank.RankOptions(seed=seed, eps=None if eps is None else _exact_positive(eps, "eps"),
                            code=words, code_name=code_name, require_nonnegative=require_nonnegative,
                            progress=notebook_progress(progress))
    cert = annotate(_rank.certify_rank(kernel, opt).certificate, kernel)
    cert.command = list(command)
    return cert


def load_certificate(source: str | os.PathLike | Mapping[str, Any]) -> Certificate:
    """A certificate from a file path, its JSON text or its parsed dict."""
    if isinstance(source, Mapping):
        return Certificate.from_json(source)
    text = str(source)
    if text.lstrip().startswith("{"):
        try:
            return Certificate.from_json(json.loads(text))
        except ValueError as exc:
            raise InputError(f"not a certificate's JSON text: {exc}") from None
    return Certificate.read(source)


def _text_and_folder(cert: Any, base: str | os.PathLike | None) -> tuple[str, Path | None]:
    if isinstance(cert, Certificate):
        return cert.dumps(), Path(base) if base is not None else Path.cwd()
    if isinstance(cert, Mapping):
        return json.dumps(cert), Path(base) if base is not None else Path.cwd()
    text = str(cert)
    if text.lstrip().startswith("{"):
        return text, Path(base) if base is not None else Path.cwd()
    p = Path(text)
    try:
        return p.read_text(), Path(base) if base is not None else p.resolve().parent
    except OSError as exc:
        raise InputError(f"cannot read certificate {p}: {exc.strerror}") from None


def verify(cert: Any, *, base: str | os.PathLike | None = None, replay_extraction: bool = False,
           weights: Sequence[str | os.PathLike] = ()):
    """``certify verify`` of a :class:`Certificate`, its dict, JSON text or a file path:
    the :class:`~certify.checkers.verify.Verification` (``holds``, ``exit_code()``,
    ``to_json()``). Input files are looked for beside the file (or in ``base``),
    in the local Hugging Face cache and under ``weights`` folders."""
    from certify.api import verify_text
    text, folder = _text_and_folder(cert, base)
    return verify_text(text, folder, replay_extraction=replay_extraction, weights=weights)


# ---------------------------------------------------------------- singular values

def _sqrt_down(q: Fraction) -> float:
    """The largest float whose square is <= q (q >= 0), checked exactly."""
    if q <= 0:
        return 0.0
    s = math.sqrt(float(q))
    while s > 0 and Fraction(s) ** 2 > q:
        s = math.nextafter(s, 0.0)
    while Fraction(math.nextafter(s, math.inf)) ** 2 <= q:
        s = math.nextafter(s, math.inf)
    return s


def _sqrt_up(q: Fraction) -> float:
    """The smallest float whose square is >= q (q >= 0), checked exactly."""
    if q <= 0:
        return 0.0
    s = math.sqrt(float(q))
    while Fraction(s) ** 2 < q:
        s = math.nextafter(s, math.inf)
    while s > 0 and Fraction(math.nextafter(s, 0.0)) ** 2 >= q:
        s = math.nextafter(s, 0.0)
    return s


@dataclass(frozen=True)
class SingularValue:
    """A certified enclosure ``lower <= sigma_i <= upper`` (floats rounded outward),
    from the exact enclosure ``sq_lower <= sigma_i^2 <= sq_upper`` of the certificate."""

    index: int                   # i, 1-based, in decreasing order of the upper bounds
    lower: float
    upper: float
    sq_lower: Fraction
    sq_upper: Fraction

    @property
    def value(self) -> float:
        """A float inside the enclosure (its midpoint), e.g. for a plot."""
        return (self.lower + self.upper) / 2

    @property
    def interval(self) -> tuple[float, float]:
        return self.lower, self.upper

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True)
class Spectrum:
    """The certified singular values of one ``eps_rank`` claim."""

    claim: int                   # the claim's index in the certificate
    statement: str
    eps: Fraction
    k: int                       # certified: exactly this many sigma_i exceed eps (or at least, by the verdict)
    verdict: str
    values: tuple[SingularValue, ...]

    def floats(self) -> list[float]:
        return [v.value for v in self.values]


def _fraction(v: Any) -> Fraction:
    from certify.core.limits import parse_exact
    if isinstance(v, bool):
        raise InputError(f"not an exact number: {v!r}")
    return Fraction(v) if isinstance(v, int) else parse_exact(str(v), "enclosure")


def singular_values(cert: Any) -> list[Spectrum]:
    """Every ``eps_rank`` claim's certified singular values (module docstring), from a
    :class:`Certificate`, its dict, JSON text or file path."""
    doc = load_certificate(cert).to_json() if not isinstance(cert, Certificate) else cert.to_json()
    out = []
    for i, c in enumerate(doc["claims"]):
        ev = c.get("evidence") or {}
        encl = ev.get("sigma_sq_enclosures")
        if c.get("kind") != "eps_rank" or not isinstance(encl, list):
            continue
        pairs = sorted(((_fraction(lo), _fraction(hi)) for lo, hi in encl), key=lambda p: (-p[1], -p[0]))
        vals = tuple(SingularValue(j + 1, _sqrt_down(lo), _sqrt_up(hi), lo, hi) for j, (lo, hi) in enumerate(pairs))
        out.append(Spectrum(i, str(c.get("statement")), _fraction(ev.get("eps")), int(ev.get("k", 0)),
                            str(c.get("verdict")), vals))
    return out


def plot(cert: Any, ax: Any = None):
    """The certified singular values of every ``eps_rank`` claim on a log scale, each an
    interval bar, with eps; the matplotlib ``Axes`` (a new figure's when ``ax`` is None)."""
    import matplotlib.pyplot as plt
    spectra = singular_values(cert)
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.2))
    positive = [v.lower for s in spectra for v in s.values if v.lower > 0] + [float(s.eps) for s in spectra]
    floor = min(positive) / 100 if positive else 1e-12
    for n, s in enumerate(spectra):
        color = f"C{n % 10}"
        xs = [v.index for v in s.values]
        ax.vlines(xs, [max(v.lower, floor) for v in s.values], [v.upper for v in s.values], lw=3,
                  color=color, label=f"claim {s.claim}: {s.k} values > eps")
        ax.scatter(xs, [v.upper for v in s.values], marker="_", s=120, color=color)
    for eps in sorted({float(s.eps) for s in spectra}):
        ax.axhline(eps, ls="--", lw=1, color="0.3", label=f"eps = {eps:.3g}")
    ax.set_yscale("log")
    ax.set_xlabel("index i")
    ax.set_ylabel("sigma_i (certified enclosure)")
    if spectra:
        ax.legend(fontsize=7)
    return ax
