"""Finite input families: the hard instances the paper's proofs and experiments use.

A :class:`Family` is a finite set of equal-length input sequences over a set
of distinct Boolean tokens, with the positions whose error is checked
("scored") and the Min-IP targets. Builders:

* :func:`chain_family` -- the Thm 5 / Lemma 3 chain family of any code;
* :func:`paper51_family` -- the Sec. 5.1 family (``"paper-5.1"``);
* :func:`multilevel_spec` -- the Sec. 4 multilevel family, assignments lazily;
* :func:`ood_families` -- the Sec. 5.2 train / joint-OOD test pools.

The ``certify families`` command is :mod:`certify.cli.families`.

File format (``.json``; ``.npz`` holds the same fields as arrays):
``{"format": "certify-attention/family/1", "name", "m", "n",
"tokens": ["0101..." per token, coordinate 0 first], "inputs": [[token indices]],
"scored": [[0/1]], "targets": [[ints]], "params": {...}, "words": [bitstrings]
or null, "jumps": [[11 ints]] or null, "sha256"}``. Loading re-derives the
targets and the hash and rejects a file where either disagrees.
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from certify.core import codes as _codes
from certify.core.files import atomic_write_bytes, atomic_write_text, sha256_bytes
from certify.core.cube import check_binary, targets_from_indices
from certify.core.errors import InputError

FORMAT = "certify-attention/family/1"

#: Columns of ``Family.jumps``. ``word_s``/``word_u`` index ``Family.words``;
#: ``x, y, z`` index tokens (query, lower-overlap key, higher-overlap key);
#: ``t = <x, y> < u = <x, z>``; ``input_y/z/m`` index the Lemma 3 inputs
#: ``Y = (x, y^(n-1))``, ``Z = (x, z^(n-1))``, ``M = (x, y, z^(n-2))``.
JUMP_COLUMNS = ("word_s", "word_u", "step", "x", "y", "z", "t", "u",
                "input_y", "input_z", "input_m")


@dataclass(frozen=True, eq=False)
class Family:
    name: str
    tokens: np.ndarray            # (K, m) uint8, distinct rows
    inputs: np.ndarray            # (I, n) int64 indices into tokens
    scored: np.ndarray            # (I, n) bool
    targets: np.ndarray           # (I, n) int64 Min-IP targets
    params: Mapping[str, Any] = field(default_factory=dict)
    words: np.ndarray | None = None   # (W, M) uint8
    jumps: np.ndarray | None = None   # (J, 11) int64

    def __post_init__(self) -> None:
        validate(self)

    @property
    def m(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def n(self) -> int:
        return int(self.inputs.shape[1])

    @cached_property
    def sha256(self) -> str:
        """Hash of the canonical JSON form without its own hash."""
        return sha256_bytes(_canonical(self._body()).encode())

    def query_tokens(self) -> np.ndarray:
        """Sorted token indices that occur at scored positions."""
        return np.unique(self.inputs[self.scored])

    def counts(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "m": self.m,
            "n": self.n,
            "words": None if self.words is None else int(self.words.shape[0]),
            "tokens": int(self.tokens.shape[0]),
            "inputs": int(self.inputs.shape[0]),
            "scored_positions": int(self.scored.sum()),
            "query_tokens": int(self.query_tokens().size),
            "jumps": 0 if self.jumps is None else int(self.jumps.shape[0]),
            "sha256": self.sha256,
        }

    # ------------------------------------------------------------ files
    def _body(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "m": self.m,
            "n": self.n,
            "tokens": [_bits(t) for t in self.tokens],
            "inputs": self.inputs.tolist(),
            "scored": self.scored.astype(int).tolist(),
            "targets": self.targets.tolist(),
            "params": dict(self.params),
            "words": None if self.words is None else [_bits(w) for w in self.words],
            "jumps": None if self.jumps is None else self.jumps.tolist(),
        }

    def to_json(self) -> dict[str, Any]:
        body = self._body()
        body["sha256"] = self.sha256
        return body

    @classmethod
    def from_json(cls, obj: Any) -> "Family":
        if not isinstance(obj, Mapping) or obj.get("format") != FORMAT:
            raise InputError(f"not a family file (format must be {FORMAT!r})")
        known = {"format", "name", "m", "n", "tokens", "inputs", "scored", "targets",
                 "params", "words", "jumps", "sha256"}
        extra = set(obj) - known
        if extra:
            raise InputError(f"family file has unknown keys: {sorted(extra)}")
        try:
            tokens = np.array([_unbits(s) for s in obj["tokens"]], dtype=np.uint8)
            inputs = _int_array(obj["inputs"], "inputs", 2)
            scored = _int_array(obj["scored"], "scored", 2).astype(bool)
            targets = _int_array(obj["targets"], "targets", 2)
            words = None if obj.get("words") is None else np.array(
                [_unbits(s) for s in obj["words"]], dtype=np.uint8)
            jumps = None if obj.get("jumps") is None else _int_array(obj["jumps"], "jumps", 2)
            fam = cls(name=str(obj["name"]), tokens=tokens, inputs=inputs, scored=scored,
                      targets=targets, params=dict(obj.get("params") or {}),
                      words=words, jumps=jumps)
        except KeyError as exc:
            raise InputError(f"family file lacks the field {exc.args[0]!r}") from None
        if tokens.ndim != 2 or int(obj.get("m", -1)) != fam.m or int(obj.get("n", -1)) != fam.n:
            raise InputError("family file: m or n disagrees with the tokens or inputs")
        if "sha256" in obj and obj["sha256"] != fam.sha256:
            raise InputError("family file: sha256 does not match its contents")
        return fam

    def save(self, path: str | os.PathLike) -> None:
        """Write ``.json`` or ``.npz`` atomically."""
        path = Path(path)
        if path.suffix == ".json":
            atomic_write_text(path, json.dumps(self.to_json()) + "\n")
        elif path.suffix == ".npz":
            import io
            buf = io.BytesIO()
            arrays = {"tokens": self.tokens, "inputs": self.inputs,
                      "scored": self.scored, "targets": self.targets,
                      "meta": np.array(json.dumps({"format": FORMAT, "name": self.name,
                                                   "params": dict(self.params),
                                                   "sha256": self.sha256}))}
            if self.words is not None:
                arrays["words"] = self.words
            if self.jumps is not None:
                arrays["jumps"] = self.jumps
            np.savez_compressed(buf, **arrays)
            atomic_write_bytes(path, buf.getvalue())
        else:
            raise InputError(f"family files end in .json or .npz, got {path.name!r}")

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Family":
        path = Path(path)
        if not path.is_file():
            raise InputError(f"no family file at {path}")
        if path.suffix == ".json":
            try:
                obj = json.loads(path.read_text())
            except (ValueError, RecursionError) as exc:   # bad JSON, bad UTF-8, over-long integers
                raise InputError(f"family file {path} is not valid JSON: "
                                 f"{' '.join(str(exc).split())[:100]}") from None
            return cls.from_json(obj)
        if path.suffix == ".npz":
            try:
                with np.load(path, allow_pickle=False) as z:
                    data = {k: z[k] for k in z.files}
                meta = json.loads(str(data.pop("meta")))
            except (OSError, EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
                why = " ".join(str(exc).split())[:120] or type(exc).__name__
                raise InputError(f"family file {path} is corrupt or empty ({why})") from None
            if not isinstance(meta, dict):
                raise InputError(f"family file {path}: metadata is not a JSON object")
            if meta.get("format") != FORMAT:
                raise InputError(f"not a family file (format must be {FORMAT!r})")
            try:
                fam = cls(name=meta["name"], tokens=data["tokens"], inputs=data["inputs"],
                          scored=data["scored"], targets=data["targets"],
                          params=meta.get("params", {}), words=data.get("words"),
                          jumps=data.get("jumps"))
            except KeyError as exc:
                raise InputError(f"family file lacks the field {exc.args[0]!r}") from None
            if meta.get("sha256") != fam.sha256:
                raise InputError("family file: sha256 does not match its contents")
            return fam
        raise InputError(f"family files end in .json or .npz, got {path.name!r}")


def validate(f: Family) -> None:
    """Check shapes, binary distinct tokens, index ranges and that every target is
    the Min-IP target of its input. Normalises dtypes in place (frozen-safe)."""
    tokens = check_binary(f.tokens, "family tokens")
    if tokens.ndim != 2:
        raise InputError(f"family tokens must be (K, m), got shape {tokens.shape}")
    if np.unique(tokens, axis=0).shape[0] != tokens.shape[0]:
        raise InputError("family tokens are not distinct")
    inputs = np.asarray(f.inputs)
    if inputs.ndim != 2 or inputs.shape[0] == 0 or inputs.shape[1] == 0:
        raise InputError(f"family inputs must be a non-empty (I, n) array, got {inputs.shape}")
    if not np.issubdtype(inputs.dtype, np.integer):
        raise InputError("family inputs must be token indices (integers)")
    inputs = inputs.astype(np.int64)
    if inputs.min() < 0 or inputs.max() >= tokens.shape[0]:
        raise InputError("family inputs index tokens out of range")
    scored = np.asarray(f.scored)
    targets = np.asarray(f.targets)
    if scored.shape != inputs.shape or targets.shape != inputs.shape:
        raise InputError("family scored/targets must have the shape of inputs")
    if not scored.any():
        raise InputError("family has no scored position")
    expected = targets_from_indices(tokens, inputs)
    if not np.array_equal(expected, targets):
        i, j = np.argwhere(expected != targets)[0]
        raise InputError(f"family input {i} position {j}: target {int(targets[i, j])} is not "
                         f"the Min-IP target {int(expected[i, j])}")
    object.__setattr__(f, "tokens", tokens)
    object.__setattr__(f, "inputs", inputs)
    object.__setattr__(f, "scored", scored.astype(bool))
    object.__setattr__(f, "targets", targets.astype(np.int64))
    if f.words is not None:
        object.__setattr__(f, "words", _codes.as_words(f.words))
    if f.jumps is not None:
        jumps = np.asarray(f.jumps, dtype=np.int64)
        if jumps.ndim != 2 or jumps.shape[1] != len(JUMP_COLUMNS):
            raise InputError(f"family jumps must be (J, {len(JUMP_COLUMNS)})")
        object.__setattr__(f, "jumps", jumps)
    for a in (f.tokens, f.inputs, f.scored, f.targets, f.words, f.jumps):
        if a is not None:
            a.setflags(write=False)


# ---------------------------------------------------------------- builders

class _TokenTable:
    """Assigns each distinct token an index in order of first appearance."""

    def __init__(self) -> None:
        self.index: dict[bytes, int] = {}
        self.rows: list[np.ndarray] = []

    def add(self, tok: np.ndarray) -> int:
        key = np.asarray(tok, dtype=np.uint8).tobytes()
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.rows)
            self.rows.append(np.asarray(tok, dtype=np.uint8))
        return i

    def array(self) -> np.ndarray:
        return np.array(self.rows, dtype=np.uint8)


def chain_levels(D: int, g: int) -> list[int]:
    """Overlap levels of a Thm 5 chain: ``D = k g + r0``, ``l_0 = 0``,
    ``l_i = i g + r0`` for ``i = 1..k`` (so ``l_k = D``; every jump is ``>= g``)."""
    k, r0 = divmod(D, g)
    return [0] + [i * g + r0 for i in range(1, k + 1)]


def chain_family(words, n: int = 3, eps: Fraction | str = Fraction(1, 2), g: int | None = None,
                 name: str | None = None) -> Family:
    """The Thm 5 chain family of a constant-weight code.

    For each ordered pair ``(S, U)`` of distinct words with ``D = |S \\ U|``,
    the query is ``x = x_S`` and the key chain runs from ``y_0 = x_{S^c}``
    (overlap 0) to ``y_k = x_{U^c}`` (overlap ``D``) through the levels of
    :func:`chain_levels`. Intermediate keys (the paper leaves them open) are
    the indicators of the *first* ``l_i`` coordinates of ``supp(x_S)``. Each
    jump ``t -> u`` emits Lemma 3's three inputs ``Y = (x, y^(n-1))``,
    ``Z = (x, z^(n-1))``, ``M = (x, y, z^(n-2))`` with the query at position 0,
    the only scored position (the inputs Lemma 3's proof uses).

    ``g`` defaults to the least integer with ``g > 2 eps (n-1)/(n-2)`` and
    ``mu_g > 1``. Pairs with ``D < g`` give no jump.
    """
    eps = Fraction(eps)
    if not isinstance(n, (int, np.integer)) or n < 3:
        raise InputError(f"Lemma 3 needs exact length n >= 3, got n = {n}")
    if not 0 < eps <= Fraction(1, 2):
        raise InputError(f"error eps must satisfy 0 < eps <= 1/2, got {eps}")
    threshold = 2 * eps * (n - 1) / (n - 2)
    if g is None:
        g = int(threshold) + 1
        while Fraction(n - 2) * (g - 2 * eps) / (2 * eps) <= 1:
            g += 1
    if g <= threshold:
        raise InputError(f"step g = {g} must exceed 2 eps (n-1)/(n-2) = {threshold}")
    w = _codes.as_words(words)
    h = int(w[0].sum())
    _codes.verify_code(w, h=h, delta=1)
    D = _codes.directed_distances(w)

    table = _TokenTable()
    inputs: list[list[int]] = []
    jumps: list[list[int]] = []
    for s_idx in range(w.shape[0]):
        x = w[s_idx]
        x_i = table.add(x)
        support = np.flatnonzero(x)
        for u_idx in range(w.shape[0]):
            if u_idx == s_idx or D[s_idx, u_idx] < g:
                continue
            levels = chain_levels(int(D[s_idx, u_idx]), g)
            chain = [table.add(1 - x)]
            for lvl in levels[1:-1]:
                y = np.zeros_like(x)
                y[support[:lvl]] = 1
                chain.append(table.add(y))
            chain.append(table.add(1 - w[u_idx]))
            for step in range(len(levels) - 1):
                y_i, z_i = chain[step], chain[step + 1]
                t, u = levels[step], levels[step + 1]
                base = len(inputs)
                inputs.append([x_i] + [y_i] * (n - 1))
                inputs.append([x_i] + [z_i] * (n - 1))
                inputs.append([x_i, y_i] + [z_i] * (n - 2))
                jumps.append([s_idx, u_idx, step, x_i, y_i, z_i, t, u, base, base + 1, base + 2])
    if not inputs:
        raise InputError(f"no pair of code words is at directed distance >= g = {g}")
    tokens = table.array()
    inputs_arr = np.array(inputs, dtype=np.int64)
    scored = np.zeros(inputs_arr.shape, dtype=bool)
    scored[:, 0] = True
    targets = targets_from_indices(tokens, inputs_arr)
    jumps_arr = np.array(jumps, dtype=np.int64)
    # the chain's overlaps are what the construction says they are
    G = tokens.astype(np.int64) @ tokens.T.astype(np.int64)
    assert np.array_equal(G[jumps_arr[:, 3], jumps_arr[:, 4]], jumps_arr[:, 6])
    assert np.array_equal(G[jumps_arr[:, 3], jumps_arr[:, 5]], jumps_arr[:, 7])
    params = {"builder": "chain", "n": int(n), "eps": f"{eps.numerator}/{eps.denominator}",
              "g": int(g), "h": h, "M": int(w.shape[1]),
              "intermediate_keys": "first l_i coordinates of supp(x_S)",
              "scored": "query position 0"}
    return Family(name=name or f"chain-W{w.shape[0]}-M{w.shape[1]}-n{n}-g{g}", tokens=tokens,
                  inputs=inputs_arr, scored=scored, targets=targets, params=params,
                  words=w, jumps=jumps_arr)


def paper51_family() -> Family:
    """The Sec. 5.1 family: the code of :func:`certify.codes.paper51_code`, length
    3, eps = 1/2, jumps of 3. 424 jumps, 1,272 inputs."""
    fam = chain_family(_codes.paper51_code(), n=3, eps=Fraction(1, 2), g=3, name="paper-5.1")
    object.__setattr__(fam, "params", {**fam.params, "code": "paper51_code (Paley H24 rows 1-14 "
                                       "+ complement of row 1)"})
    return fam


# ---------------------------------------------------------------- Sec. 4 multilevel family

@dataclass(frozen=True, eq=False)
class MultilevelSpec:
    """The Sec. 4 multilevel family for ``(M, s, h, code, q)``, assignments lazily.

    Token dimension ``m = 2 + M + s``. Query ``q_S = (0, 1, x_{S^c}, 1_s)``;
    database token ``d_{U,k} = (1, 0, x_U, u_k)`` with ``u_k`` the first ``k``
    of the ``s`` unary coordinates. ``<q_S, d_{U,k}> = |U \\ S| + k``. For an
    assignment ``kappa in {0..s}^q`` the input is ``(q_S)_{S in Q}`` followed
    by ``(d_{S, kappa_S})_{S in Q}``, ``Q`` the first ``q`` words; the target
    at ``q_S`` is ``kappa_S``.

    Token order: the ``q`` queries, then ``d_{S_i, k}`` at index
    ``q + i (s + 1) + k``.
    """

    M: int
    s: int
    h: int
    q: int
    words: np.ndarray        # (q, M) the subcode Q

    @property
    def m(self) -> int:
        return 2 + self.M + self.s

    @property
    def n(self) -> int:
        return 2 * self.q

    @property
    def num_assignments(self) -> int:
        return (self.s + 1) ** self.q

    @property
    def query_positions(self) -> np.ndarray:
        return np.arange(self.q)

    @cached_property
    def tokens(self) -> np.ndarray:
        M, s, q = self.M, self.s, self.q
        toks = np.zeros((q + q * (s + 1), self.m), dtype=np.uint8)
        for i, S in enumerate(self.words):
            toks[i, 1] = 1
            toks[i, 2:2 + M] = 1 - S
            toks[i, 2 + M:] = 1
            for k in range(s + 1):
                row = toks[q + i * (s + 1) + k]
                row[0] = 1
                row[2:2 + M] = S
                row[2 + M:2 + M + k] = 1
        return toks

    def assignments(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Assignments ``start..stop-1`` in lexicographic order (kappa_0 most
        significant), shape ``(B, q)``."""
        stop = self.num_assignments if stop is None else min(stop, self.num_assignments)
        if not 0 <= start <= stop:
            raise InputError(f"assignment range {start}:{stop} is invalid")
        idx = np.arange(start, stop, dtype=np.int64)
        powers = (self.s + 1) ** np.arange(self.q - 1, -1, -1, dtype=np.int64)
        return (idx[:, None] // powers) % (self.s + 1)

    def assignment_index(self, kappas: np.ndarray) -> np.ndarray:
        kappas = np.asarray(kappas, dtype=np.int64)
        powers = (self.s + 1) ** np.arange(self.q - 1, -1, -1, dtype=np.int64)
        return kappas @ powers

    def inputs(self, kappas: np.ndarray) -> np.ndarray:
        """Token indices ``(B, 2q)`` of the inputs for assignments ``(B, q)``."""
        kappas = self._check(kappas)
        B = kappas.shape[0]
        queries = np.broadcast_to(np.arange(self.q), (B, self.q))
        db = self.q + np.arange(self.q) * (self.s + 1) + kappas
        return np.concatenate([queries, db], axis=1)

    def targets(self, kappas: np.ndarray) -> np.ndarray:
        """Min-IP targets ``(B, 2q)``; at the query positions they equal kappa."""
        return targets_from_indices(self.tokens, self.inputs(kappas))

    def family(self, kappas: np.ndarray | None = None) -> Family:
        """The family of ``kappas`` (all assignments by default). The built-in
        name ``multilevel-M..-s..-h..-q..`` is used only for all assignments over
        the default greedy code; any other choice is named apart from it."""
        name = f"multilevel-M{self.M}-s{self.s}-h{self.h}-q{self.q}"
        default_code = np.array_equal(
            self.words, _codes.greedy_packing(self.M, self.h, self.s + 1, limit=self.q))
        if not default_code:
            name += "-code" + sha256_bytes(self.words.tobytes())[:12]
        if kappas is None:
            if self.num_assignments > 1 << 20:
                raise InputError(f"{self.num_assignments} assignments are too many to "
                                 "materialise; enumerate them lazily")
            kappas = self.assignments()
        elif len(np.asarray(kappas)) != self.num_assignments:
            name += f"-subset{len(np.asarray(kappas))}"
        inputs = self.inputs(kappas)
        scored = np.zeros(inputs.shape, dtype=bool)
        scored[:, :self.q] = True
        return Family(name=name,
                      tokens=self.tokens, inputs=inputs, scored=scored,
                      targets=targets_from_indices(self.tokens, inputs),
                      params={"builder": "multilevel", "M": self.M, "s": self.s, "h": self.h,
                              "q": self.q, "assignments": int(len(inputs))},
                      words=self.words)

    def _check(self, kappas) -> np.ndarray:
        kappas = np.asarray(kappas, dtype=np.int64)
        if kappas.ndim != 2 or kappas.shape[1] != self.q:
            raise InputError(f"assignments must have shape (B, {self.q})")
        if kappas.min(initial=0) < 0 or kappas.max(initial=0) > self.s:
            raise InputError(f"assignment values must lie in 0..{self.s}")
        return kappas


def multilevel_spec(M: int, s: int, h: int, q: int, words=None) -> MultilevelSpec:
    """Build the Sec. 4 family. Without ``words`` the code is the greedy packing of
    ``binom([M], h)`` at distance ``s + 1``; its first ``q`` words are used."""
    for nm, v, lo in (("M", M, 1), ("s", s, 1), ("q", q, 1)):
        if not isinstance(v, (int, np.integer)) or v < lo:
            raise InputError(f"{nm} must be an integer >= {lo}, got {v!r}")
    if not isinstance(h, (int, np.integer)) or not 0 <= h <= M:
        raise InputError(f"code weight h must satisfy 0 <= h <= M = {M}, got {h!r}")
    if words is None:
        words = _codes.greedy_packing(M, h, s + 1, limit=q)
    w = _codes.verify_code(words, h=h, delta=s + 1)
    if w.shape[1] != M:
        raise InputError(f"code words have length {w.shape[1]}, expected M = {M}")
    if q > w.shape[0]:
        raise InputError(f"q = {q} exceeds the code size {w.shape[0]} at (M, h, s) = ({M}, {h}, {s})")
    return MultilevelSpec(M=int(M), s=int(s), h=int(h), q=int(q), words=w[:q].copy())


# ---------------------------------------------------------------- Sec. 5.2 OOD family

def _weight_words(M: int, k: int) -> np.ndarray:
    """Every weight-``k`` word of length ``M`` as a (C(M, k), M) uint8 array, in the
    order of ``itertools.combinations(range(M), k)`` (vectorised: M = 24 in a
    second instead of half a minute). Combinations in lexicographic order are the
    words read as binary numbers (position 0 the top bit) in decreasing order."""
    if M <= 26:
        v = np.arange(1 << M, dtype=np.int64)
        v = v[np.bitwise_count(v) == k][::-1]
        return ((v[:, None] >> (M - 1 - np.arange(M))) & 1).astype(np.uint8)
    import itertools
    return np.array([[1 if i in c else 0 for i in range(M)]
                     for c in itertools.combinations(range(M), k)], dtype=np.uint8)


def ood_families(M: int, q: int, n: int | None = None, *, train_size: int = 2048,
                 test_size: int = 1024, seed: int = 0) -> tuple[Family, Family]:
    """The Sec. 5.2 train and joint-OOD test pools at scale ``(M, q, n = 2q)``.

    Token dimension ``M + 2``: a query for codeword ``S`` is ``(1, 0, x_S)``; its
    matching database token ``(0, 1, x_{S^c})`` has overlap 0 (target 0); its
    safe padding ``(0, 1, x_{S^c} + e_c)``, ``c`` the first coordinate of ``S``,
    has overlap 1 with it (target 1) and overlap ``>= 1`` with every other
    query, as every database token has. Codewords are the weight-``M/2``
    words of ``[M]``. An input draws ``q`` distinct codewords, an assignment in
    ``{0,1}^q`` (1 = matching, 0 = padding), a permutation of the ``M`` code
    coordinates, and a shuffle of the ``2q`` positions. Train and test pools
    are disjoint in codewords, assignments and coordinate permutations (each
    set split in two by a seeded shuffle). Queries are the scored positions.
    The draws come from :func:`certify.checkers.generators.ood_pools` (a
    versioned SplitMix64 stream), so a name means one family on every machine;
    the name ``ood-M-q-n-split`` is built-in only at the default sizes and seed.
    """
    if n is None:
        n = 2 * q
    if n != 2 * q:
        raise InputError(f"the Sec. 5.2 family has length n = 2q, got n = {n}, q = {q}")
    if M < 2 or M % 2 or q < 1:
        raise InputError(f"need even M >= 2 and q >= 1, got M = {M}, q = {q}")
    from certify.checkers.generators import OOD_DEFAULTS, OOD_GENERATOR, ood_pools
    pools = ood_pools(M, q, train_size, test_size, seed)
    if pools is None:
        raise InputError(f"M = {M} gives too few codewords for q = {q} in each pool")
    default = (train_size, test_size, seed) == (OOD_DEFAULTS["train_size"],
                                                OOD_DEFAULTS["test_size"], OOD_DEFAULTS["seed"])
    out = []
    for split, (toks, rows, flags) in zip(("train", "test"), pools):
        tokens = np.array(toks, dtype=np.uint8)
        inputs = np.array(rows, dtype=np.int64)
        name = f"ood-{M}-{q}-{n}-{split}"
        if not default:      # the built-in name means the default sizes and seed only
            name += f"-size{train_size if split == 'train' else test_size}-seed{seed}"
        fam = Family(name=name, tokens=tokens, inputs=inputs, scored=np.array(flags, dtype=bool),
                     targets=targets_from_indices(tokens, inputs),
                     params={"builder": "ood", "generator": OOD_GENERATOR, "M": M, "q": q,
                             "n": n, "seed": seed, "split": split,
                             "size": train_size if split == "train" else test_size})
        t = fam.targets[fam.scored]
        assert set(np.unique(t).tolist()) <= {0, 1}
        out.append(fam)
    return out[0], out[1]


# ---------------------------------------------------------------- registry, files

def builtin_names() -> list[str]:
    return ["paper-5.1", "ood-M-q-n-train|test (e.g. ood-6-4-8-test)",
            "multilevel-M-s-h-q (e.g. multilevel-12-2-6-4)"]


def load_family(name_or_path: str) -> Family:
    """A built-in family by name, or a family file (``.json`` / ``.npz``)."""
    spec = str(name_or_path)
    if spec == "paper-5.1":
        return paper51_family()
    parts = spec.split("-")
    if parts[0] == "ood" and len(parts) == 5 and parts[4] in ("train", "test"):
        try:
            M, q, n = (int(p) for p in parts[1:4] if len(p) < 12)
        except ValueError:
            raise InputError(f"bad OOD family name {spec!r}") from None
        check_family_size(M=M, q=q)
        train, test = ood_families(M, q, n)
        return train if parts[4] == "train" else test
    if parts[0] == "multilevel" and len(parts) == 5 and not os.path.exists(spec):
        try:
            M, s, h, q = (int(p) for p in parts[1:] if len(p) < 12)
        except ValueError:
            raise InputError(f"bad multilevel family name {spec!r}") from None
        check_family_size(M=M, q=q, s=s, h=h)
        return multilevel_spec(M, s, h, q).family()
    if os.path.exists(spec):
        return Family.load(spec)
    raise InputError(f"unknown family {spec!r}: not a file and not one of {', '.join(builtin_names())}")


def check_family_size(**params: int | None) -> None:
    """Family parameters against the documented limits (certify.limits)."""
    from certify.core import limits
    for nm, v in params.items():
        if v is None:
            continue
        key = {"M": "family_m", "m": "family_m", "size": "family_size", "n": "chain_n"}.get(nm, "family_q")
        limits.check_int(key, int(v), f"family parameter {nm}", low=0)


def _bits(row: np.ndarray) -> str:
    return "".join("1" if v else "0" for v in row)


def _unbits(s: Any) -> list[int]:
    if not isinstance(s, str) or not s or set(s) - {"0", "1"}:
        raise InputError(f"a token must be a string of 0s and 1s, got {s!r}")
    return [int(c) for c in s]


def _int_array(x: Any, what: str, ndim: int) -> np.ndarray:
    try:
        arr = np.array(x)
    except ValueError:
        raise InputError(f"family {what} is ragged") from None
    if arr.ndim != ndim or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise InputError(f"family {what} must be a {ndim}-d integer array")
    return arr.astype(np.int64)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------- code files

def load_code(path: str) -> np.ndarray:
    """A code file: JSON list of bit strings (``["1100", ...]``), or ``.npy`` /
    ``.txt`` (one bit string per line)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"no code file at {path}")
    try:
        if p.suffix == ".npy":
            return _codes.as_words(np.load(p, allow_pickle=False))
        text = p.read_text()
        rows = json.loads(text) if p.suffix == ".json" else text.split()
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise InputError(f"code file {path} is unreadable: {exc}") from None
    if not isinstance(rows, list) or not rows:
        raise InputError(f"code file {path} must list the code words")
    words = [_unbits(r) for r in rows]
    if len({len(w) for w in words}) != 1:
        raise InputError(f"code file {path}: words have different lengths")
    return _codes.as_words(words)
