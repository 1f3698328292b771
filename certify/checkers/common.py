"""Shared helpers of the independent checkers (standard library and numpy; exact arithmetic is the kernel's).

* :class:`Bad` -- raised by every helper on malformed or inconsistent evidence;
  each checker turns it into one problem line.
* exact numbers: :func:`rational` (an int or a ``"p/q"`` string; floats, bools
  and ``None`` are rejected), :func:`integer`, :func:`boolean`,
  :func:`rational_matrix`, :func:`int_matrix`, :func:`packed_matrix`, :func:`q_str`.
* :func:`keys` -- an object has exactly the expected keys (a missing key and an
  unexpected key are both problems).
* :func:`canonical_sha256` -- sha256 of the canonical JSON form (sorted keys, no
  spaces), the hash every producer uses for embedded objects.
* :func:`family` -- an embedded family file object, re-validated: its hash, its
  key set, distinct 0/1 tokens, inputs in range, ``m`` and ``n``, and every
  Min-IP target *re-derived* from the tokens (the stored targets must agree).
* :func:`min_ip_targets` -- Min-IP targets of one sequence of 0/1 rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Mapping

from certify.checkers.fields import (
    FAMILY_FILE,
    Bad,  # re-exported: a declaration's closed-key check raises it too
)
from certify.checkers.kernel.hashing import canonical_sha256  # noqa: F401  (re-exported)
from certify.checkers.reading import NotACertificate, path_problem  # noqa: F401  (re-exported: defined with the reading of certificates, shared with certify.reference)

FAMILY_FORMAT = "certify-attention/family/1"
JUMP_COLUMNS = ("word_s", "word_u", "step", "x", "y", "z", "t", "u", "input_y", "input_z",
                "input_m")


#: ``certify verify`` exit codes (docs/design.md, "Exit codes"): 0 every verdict
#: re-derived, no assumption left; 1 some claim fails; 2 not a certificate;
#: 4 every claim holds, but only under named assumptions.
EXIT_PROVED, EXIT_NOT_PROVED, EXIT_BAD_INPUT, EXIT_ASSUMED = 0, 1, 2, 4


# ---------------------------------------------------------------- exact numbers

def rational(v: Any, what: str = "value") -> Fraction:
    """An exact rational from a JSON int or a ``"p"`` / ``"p/q"`` string."""
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise Bad(f"{what} must be an exact int or 'p/q' string, got {v!r:.60}")
    if isinstance(v, int):
        return Fraction(v)
    num, sep, den = v.strip().partition("/")
    try:
        a = int(num)
        b = int(den) if sep else 1
    except ValueError:
        raise Bad(f"{what} is not an exact rational: {v!r:.60}") from None
    if b <= 0:
        raise Bad(f"{what} has a denominator <= 0: {v!r:.60}")
    return Fraction(a, b)


def integer(v: Any, what: str = "value", lo: int | None = None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise Bad(f"{what} must be an integer, got {v!r:.60}")
    if lo is not None and v < lo:
        raise Bad(f"{what} = {v} < {lo}")
    return v


def boolean(v: Any, what: str = "value") -> bool:
    if not isinstance(v, bool):
        raise Bad(f"{what} must be a boolean, got {v!r:.60}")
    return v


def q_str(x: Fraction | int) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"


def same_rational(stated: Any, value: Fraction, what: str) -> None:
    """``stated`` (JSON) must be exactly ``value``."""
    if rational(stated, what) != value:
        raise Bad(f"{what} is {stated!r:.60}, re-derived {q_str(value):.60}")


def same_json(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same value as JSON: ``1``, ``1.0`` and ``true`` are three
    values (Python's ``==`` makes them one), ``"1"`` another; object keys in any order."""
    def canon(v: Any) -> str:
        return json.dumps(v, sort_keys=True, separators=(",", ":"), allow_nan=True)
    try:
        return canon(a) == canon(b)
    except (TypeError, ValueError, RecursionError):
        return False


def int_matrix(rows: Any, what: str, shape: tuple[int | None, int | None] = (None, None)) -> list[list[int]]:
    """A rectangular list of integer rows."""
    if isinstance(rows, list) and all(type(r) is list and set(map(type, r)) <= {int} for r in rows):
        _shape(rows, what, shape)                  # plain ints only (no bool): what integer() accepts
        return [list(r) for r in rows]
    return _matrix(rows, what, shape, integer)


def packed_matrix(value: Any, what: str) -> list[list[int]]:
    """The integer rows of a packed matrix (:data:`certify.checkers.fields.PACKED_INTS`):
    ``shape = [n, m]`` entries, row-major, each ``bytes`` bytes of little-endian two's
    complement, in standard base64 with padding. The string must be the one encoding of
    those bytes (decoded strictly and encoded again, the same text), of exactly
    ``n m bytes`` bytes."""
    import base64
    import binascii

    from certify.checkers.fields import PACKED_MAX_BYTES
    if not isinstance(value, dict) or set(value) != {"packed", "bytes", "shape", "base64"} \
            or value["packed"] != "int-le":
        raise Bad(f"{what} is not a packed integer matrix (packed: int-le, bytes, shape, base64)")
    w = integer(value["bytes"], f"{what}.bytes", 1)
    dims = value["shape"]
    if w > PACKED_MAX_BYTES or not isinstance(dims, list) or len(dims) != 2:
        raise Bad(f"{what}: bytes must be 1..{PACKED_MAX_BYTES} and shape [rows, columns]")
    n, m = integer(dims[0], f"{what}.shape", 1), integer(dims[1], f"{what}.shape", 1)
    text = value["base64"]
    if not isinstance(text, str) or len(text) != 4 * -(-(n * m * w) // 3):
        raise Bad(f"{what}: base64 is not {n * m * w} bytes")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise Bad(f"{what}: base64 does not decode") from None
    if len(raw) != n * m * w or base64.b64encode(raw).decode() != text:
        raise Bad(f"{what}: base64 is not the one encoding of {n * m * w} bytes")
    flat = [int.from_bytes(raw[i:i + w], "little", signed=True) for i in range(0, n * m * w, w)]
    return [flat[i * m:(i + 1) * m] for i in range(n)]


def expand_grams(claim: Mapping[str, Any], cert: Mapping[str, Any]) -> Mapping[str, Any]:
    """``claim`` with its stated Grams as integer rows, as every check reads them: packed
    Grams unpacked (:func:`packed_matrix`), and an eps-rank claim's ``grams_claim`` replaced
    by the Grams that claim states: an exact-rank factor claim of this certificate (so not
    this one) stating them itself, for the same ``features_sha256``, ``num_tokens`` and ``r``.
    The claim is then checked exactly as one that states them (the Gram identity, the
    trust and the replay are this claim's own). ``claim`` itself when there is nothing to
    expand."""
    from certify.checkers.fields import GRAM_FIELDS, GRAMS_CLAIM_SAME
    ev = claim.get("evidence")
    if not isinstance(ev, dict) or not ("grams_claim" in ev or isinstance(ev.get("gram_q"), dict)
                                        or isinstance(ev.get("gram_k"), dict)):
        return claim
    ev = dict(ev)
    if "grams_claim" in ev:
        i = integer(ev.pop("grams_claim"), "grams_claim", 0)
        claims = cert.get("claims")
        if claim.get("kind") != "eps_rank" or ev.get("form") != "factor" or any(k in ev for k in GRAM_FIELDS):
            raise Bad("grams_claim: only a factor-form eps_rank claim names another claim's Grams, "
                      "instead of stating them")
        other = claims[i] if isinstance(claims, list) and i < len(claims) else None
        oev = other.get("evidence") if isinstance(other, dict) else None
        if not isinstance(other, dict) or not isinstance(oev, dict) or other.get("kind") != "exact_rank" or oev.get("form") != "factor" \
                or "grams_claim" in oev or any(k not in oev for k in GRAM_FIELDS):
            raise Bad(f"grams_claim {i} is not another exact_rank factor claim that states its Grams")
        for k in GRAMS_CLAIM_SAME:
            if not same_json(oev.get(k), ev.get(k)):
                raise Bad(f"grams_claim {i}: its {k} is not this claim's")
        ev.update({k: oev[k] for k in GRAM_FIELDS})
    for k in ("gram_q", "gram_k"):
        if isinstance(ev.get(k), dict):
            ev[k] = packed_matrix(ev[k], k)
    return {**claim, "evidence": ev}


def rational_matrix(rows: Any, what: str,
                    shape: tuple[int | None, int | None] = (None, None)) -> list[list[Fraction]]:
    """A rectangular list of rows of exact rationals."""
    return _matrix(rows, what, shape, rational)


def _matrix(rows: Any, what: str, shape: tuple[int | None, int | None],
            parse: Callable[[Any, str], Any]) -> list:
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise Bad(f"{what} must be a list of rows")
    _shape(rows, what, shape)
    return [[parse(v, what) for v in r] for r in rows]


def _shape(rows: list, what: str, shape: tuple[int | None, int | None]) -> None:
    if shape[0] is not None and len(rows) != shape[0]:
        raise Bad(f"{what} has {len(rows)} rows, expected {shape[0]}")
    widths = {len(r) for r in rows}
    if len(widths) > 1 or (shape[1] is not None and rows and widths != {shape[1]}):
        raise Bad(f"{what} has rows of the wrong length")


# ---------------------------------------------------------------- objects

def without_negative_zeros(a: Any) -> Any:
    """A float array with every ``-0.0`` made ``+0.0`` (``a + 0.0`` does exactly that in
    IEEE arithmetic and changes nothing else), so that the features' hash, which
    is taken over the bytes, depends on the values only: ``-0.0 == 0.0`` as a
    number, and the exact evidence cannot tell them apart. Other dtypes unchanged."""
    import numpy as np
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return a + a.dtype.type(0)
    return a


def embedded_kernel_sha(claim: Mapping[str, Any]) -> str | None:
    """The content hash of a kernel whose data the certificate embeds (features,
    or features another claim embeds, or the exact matrix): its features' or
    matrix's hash, which the kind's checker re-derives from the embedded data."""
    ev = claim.get("evidence")
    if not isinstance(ev, Mapping):
        return None
    fs = ev.get("features_sha256")
    if isinstance(fs, Mapping) and ("features" in ev or "features_claim" in ev) \
            and isinstance(fs.get("phi_q"), str) and isinstance(fs.get("phi_k"), str):
        return f"features:{fs['phi_q']}:{fs['phi_k']}"
    if isinstance(ev.get("matrix"), list) and isinstance(ev.get("matrix_sha256"), str):
        return f"matrix:{ev['matrix_sha256']}"
    if isinstance(ev.get("matrix"), list) and isinstance(ev.get("values_sha256"), str):
        return f"matrix:{ev['values_sha256']}"               # float values (numerical_rank)
    return None



def bits(s: Any, what: str, length: int | None = None) -> list[int]:
    if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
        raise Bad(f"{what} must be a non-empty 0/1 string")
    if length is not None and len(s) != length:
        raise Bad(f"{what} has {len(s)} bits, expected {length}")
    return [int(c) for c in s]


def min_ip_targets(rows: list[list[int]]) -> list[int]:
    """``t_i = min_j <x_i, x_j>`` for one sequence of 0/1 rows (Eq. 1)."""
    return [min(sum(a & b for a, b in zip(x, y)) for y in rows) for x in rows]


# ---------------------------------------------------------------- families

@dataclass(frozen=True)
class Family:
    """An embedded family after re-validation (targets re-derived)."""

    name: str
    sha256: str
    tokens: list[list[int]]
    inputs: list[list[int]]
    scored: list[list[bool]]
    targets: list[list[int]]            # re-derived Min-IP targets
    n: int
    ip: list[list[int]]                 # token inner products
    words: list[list[int]] | None
    jumps: list[list[int]] | None
    params: dict

    def scored_positions(self) -> list[tuple[int, int]]:
        return [(i, p) for i, row in enumerate(self.scored) for p, f in enumerate(row) if f]


def family(fam: Any, params: Mapping[str, Any] | None = None) -> Family:
    """Re-validate an embedded family file object; ``params`` (the claim's) must
    name it (``family``) and carry its hash (``family_sha256``)."""
    FAMILY_FILE.check_keys(fam, "family")
    if fam["format"] != FAMILY_FORMAT:
        raise Bad(f"family format must be {FAMILY_FORMAT!r}")
    body = {k: v for k, v in fam.items() if k != "sha256"}
    digest = canonical_sha256(body)
    if fam["sha256"] != digest:
        raise Bad("the family's sha256 does not match its contents")
    if params is not None:
        if params.get("family_sha256") != digest:
            raise Bad("parameters.family_sha256 is not the hash of the embedded family")
        if params.get("family") != fam["name"]:
            raise Bad(f"parameters.family {params.get('family')!r:.60} is not the embedded "
                      f"family's name {fam['name']!r:.60}")
    if not isinstance(fam["name"], str) or not isinstance(fam["params"], dict):
        raise Bad("family name must be a string and params an object")
    toks = fam["tokens"]
    if not isinstance(toks, list) or not toks:
        raise Bad("family tokens must be a non-empty list of bit strings")
    tokens = [bits(s, "family token") for s in toks]
    m = integer(fam["m"], "family m", 1)
    if any(len(t) != m for t in tokens) or len({tuple(t) for t in tokens}) != len(tokens):
        raise Bad("family tokens must be distinct 0/1 strings of length m")
    K = len(tokens)
    inputs = int_matrix(fam["inputs"], "family inputs")
    n = integer(fam["n"], "family n", 1)
    if not inputs or len(inputs[0]) != n or any(not 0 <= v < K for r in inputs for v in r):
        raise Bad("family inputs must be non-empty rows of n token indices")
    scored = int_matrix(fam["scored"], "family scored", (len(inputs), n))
    if any(v not in (0, 1) for r in scored for v in r):
        raise Bad("family scored flags must be 0 or 1")
    stated = int_matrix(fam["targets"], "family targets", (len(inputs), n))
    ip = [[sum(a & b for a, b in zip(u, v)) for v in tokens] for u in tokens]
    targets = [[min(ip[x][z] for z in row) for x in row] for row in inputs]
    for i, (a, b) in enumerate(zip(stated, targets)):
        if a != b:
            raise Bad(f"family input {i}: targets {a} are not the Min-IP targets {b}")
    words = None
    if fam["words"] is not None:
        if not isinstance(fam["words"], list) or not fam["words"]:
            raise Bad("family words must be a list of bit strings or null")
        words = [bits(w, "family word") for w in fam["words"]]
        if len({len(w) for w in words}) != 1:
            raise Bad("family words must have one length")
    jumps = None
    if fam["jumps"] is not None:
        jumps = int_matrix(fam["jumps"], "family jumps", (None, len(JUMP_COLUMNS)))
    return Family(fam["name"], digest, tokens, inputs, [[bool(v) for v in r] for r in scored],
                  targets, n, ip, words, jumps, dict(fam["params"]))


def guarded(fn: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """Decorator: a checker body that raises :class:`Bad` (or stumbles on a
    malformed structure) returns that as its one problem."""
    def run(*args: Any, **kwargs: Any) -> list[str]:
        try:
            return fn(*args, **kwargs)
        except Bad as exc:
            return [str(exc)]
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
            return [f"malformed evidence: {type(exc).__name__}: {exc}"]
    run.__name__, run.__doc__ = fn.__name__, fn.__doc__
    return run


def int_max_abs(a: Any) -> int:
    """``max |a|`` of an integer numpy array as a Python int (0 when empty), exactly: never
    ``np.abs`` on int64, which leaves ``-2^63`` negative."""
    return max(int(a.max()), -int(a.min())) if a.size else 0
