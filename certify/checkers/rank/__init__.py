"""Independent checker for ``exact_rank``, ``eps_rank``, ``numerical_rank``, ``code_rank`` and
``nonnegative``.

Imports only the standard library, numpy and python-flint
(:mod:`certify.checkers.common`). ``check(claim, cert)`` returns the problems
found; ``[]`` means the verdict was re-derived exactly from the evidence. Every
evidence object must have exactly the keys listed here (a missing or an
unexpected key is a problem). Float diagnostics (prime attempts, counts of
float-decided products) live in the claim's ``info`` and are never read.

Features (factor form)
----------------------
``features_sha256`` = ``{phi_q, phi_k, dtype, layout}``: sha256 of ``PhiQ`` and
``PhiK`` (``(K, r)`` row-major little-endian bytes of ``dtype``). The features
themselves come from one of

* ``features`` = ``{phi_q, phi_q_exponent, phi_k, phi_k_exponent}`` (integer
  rows; ``PhiQ = phi_q 2^phi_q_exponent``): the checker rebuilds the arrays in
  ``dtype`` (each value must be representable), recomputes both hashes and
  ``num_tokens = K``, ``r``, and every summary below;
* ``features_claim`` = index of another claim of the same certificate whose
  ``features`` are used (their hashes must be this claim's);
* ``trusted`` = the exact list of fields documented below for the claim kind:
  the features are too large to embed, so these summaries are taken from the
  producer *as stated* (identified by ``features_sha256``) and not re-derived.
  :func:`trusted` lists them and ``certify verify`` prints them as trusted.

exact_rank, factor form (``form = "factor"``)
  ``num_tokens, r``, features (above; ``trusted = ["gram_q", "gram_k",
  "num_tokens"]``), ``gram_q, gram_q_exponent, gram_k, gram_k_exponent``
  (``PhiQ^T PhiQ = gram_q 2^e``, recomputed from the features), ``prime,
  minor_rows, minor_cols``: a minor of the core ``gram_q gram_k`` nonsingular
  mod ``prime`` (lower bound); ``null_basis`` (r x k integer columns, ``[]``
  when k = 0) with ``core X = 0`` and ``null_prime, null_minor_rows,
  null_minor_cols``: a k x k minor of X nonsingular mod ``null_prime``, so
  ``rank <= r - k``; ``upper_witness`` (``null_space`` / ``trivial``);
  ``rank_lower, rank_upper``. Identity: ``rank(A B^T) = rank(A^T A B^T B)``.
exact_rank, matrix form (``form = "matrix"``)
  ``shape``, ``scale`` (``{"kind": "dyadic", "exponent": e}``: the kernel is
  ``matrix 2^e``; ``{"kind": "row_denominators", "row_den": [...]}``: row i is
  ``matrix[i] / row_den[i]``), ``matrix`` (integer rows; embedded, or pass
  ``matrix=`` to :func:`check`), ``matrix_sha256`` (of the scale and the rows,
  see :func:`matrix_sha256`), ``prime, minor_rows, minor_cols``,
  ``upper_witness`` (``trivial``: ``min(shape)``; ``column_span``: every column
  in the span of the minor's columns, checked by solving exactly; ``freivalds``:
  the same span tested by :mod:`certify.checkers.rank.freivalds`, error
  probability ``<= 2^-error_log2``), ``rank_lower, rank_upper``; with
  ``freivalds`` only: ``freivalds = {challenge, vector_bits, vectors, primes}``
  (the sha256 of the claim's content, the plan ``s, t`` and the primes the
  challenge draws, all re-derived) and the parameters ``upper_bound =
  "freivalds"``, ``error_log2`` (an integer >= 1), which the statement prints.
  Parameters of both forms: ``token_set`` (``cube:M`` fixes ``K = 2^M``),
  ``shape`` (``[K, K]`` in factor form), ``form``, ``dtype`` (the features'),
  ``source`` (a label) / ``source_sha256`` (null for a kernel built in memory,
  else one of the certificate's ``inputs`` hashes, which ``certify verify``
  compares with the file when present), ``adapter`` (a label).
Stated Grams (factor form) are integer rows, or the same integers packed:
``{"packed": "int-le", "bytes": w, "shape": [n, m], "base64": ...}``, the entries
row-major, ``w`` bytes of little-endian two's complement each, in the one
standard base64 text of those bytes (:func:`certify.checkers.common.packed_matrix`).
An eps-rank claim may name, instead of stating them, the Grams of an exact-rank
factor claim of the same certificate with the same ``features_sha256``,
``num_tokens`` and ``r`` (``grams_claim``, its index: a head's Grams are written
once). Either way a claim is checked with its Grams as rows
(:func:`certify.checkers.common.expand_grams`), exactly as one that states them.
eps_rank, factor form
  the Gram fields (or ``grams_claim``) and features as above, ``eps`` (= ``parameters.eps``), ``k``
  (sign changes of ``charpoly(core 2^e - eps^2 I)``, Descartes, exact for the
  real-rooted core), ``exact`` (true: the count is the eps-rank), and
  ``sigma_sq_enclosures``: ``[lo, hi]`` per eigenvalue of ``A^T A``, largest
  first; each is checked by exact root counting (``lambda_i`` lies in it) and
  must be at most ``2^-20`` of the largest value wide.
eps_rank, matrix form
  ``shape, scale, matrix, matrix_sha256, eps, k, exact`` and ``method``:
  ``gram`` (count on ``A^T A`` or ``A A^T``; ``exact`` true) or ``projection``
  (``witness_y, witness_y_exponent``: ``H - eps^2 b I > 0`` exactly with
  ``H = (A Y)^T (A Y)``, ``b = ||Y^T Y||_inf``; ``exact`` false).
numerical_rank (matrix form, float64 values)
  ``shape, values_sha256`` (the float64 values, :func:`certify.checkers.kernel.hashing.float64_sha256`;
  embedded as ``matrix 2^matrix_exponent`` when small, else re-read from the source), ``sigma_max``
  (``[lo, hi]`` holding sigma_1 for ``tol = "default"``, else null), ``tol_lower, tol_upper``
  (``N 2^-52 [lo, hi]`` with ``N = max(shape)``, or the stated tol twice), ``k_lower`` (the count
  the kernel's bounds prove above ``tol_upper``) and ``k_upper`` (at most that many above
  ``tol_lower``: ``sigma_{k_upper + 1} <= tol_lower`` proved, or ``min(shape)``); proved exactly
  when they meet (:mod:`certify.checkers.rank.numerical`).
code_rank
  ``words`` (0/1 strings of one length and weight), ``query_features,
  query_exponent`` (rows ``phiQ(x_S)``), ``key_features, key_exponent`` (rows
  ``phiK(x_(U^c))``); ``features_sha256`` and features as above: on a
  ``cube:M`` token set the rows are compared with the kernel's rows at the
  words' tokens (else ``trusted = ["query_features", "key_features"]``, with
  ``features_sha256`` optional: a lone claim on a large token set); matrix
  form: ``B`` (p/q) and ``trusted = ["B"]``. Re-derived: ``t, kept,
  frobenius_sq, bound, rank_lower = ceil(bound), min_lambda`` (Lemma 4,
  ``rank >= t^2 / (t + sum_{S != U} (B_SU / B_SS)^2)``). Never refuted.
  Parameters ``code`` (a label), ``num_words, M, token_set``.
nonnegative
  factor form: ``form, features_sha256``, features, ``method``:
  ``features_nonnegative`` (``min_phi_q, min_phi_k`` re-derived; trusted
  ``["min_phi_q", "min_phi_k"]``), ``all_products`` (``num_checked = K^2``;
  every product ``PhiQ PhiK^T`` recomputed; trusted ``["all_products"]``),
  ``counterexample`` (``pair``, ``phi_q_row, phi_q_exponent, phi_k_row,
  phi_k_exponent`` = the features of the pair, ``value`` < 0 recomputed;
  trusted ``["phi_q_row", "phi_k_row"]``), ``quadratic_kernel`` (the
  structure lemma of Based's ``1 + s + s^2/2``: layout ``constant, linear,
  quadratic``, coefficients ``g_diag, g_off`` and per-side summaries
  ``min_const_*, max_linear_sq_*, max_quadratic_sq_*, max_residual_sq_*``
  (``_q``, ``_k``), trusted when the features are not embedded; see
  :mod:`certify.checkers.rank.nonnegative`), ``key_box`` (``key_lo, key_hi,
  min_query_bound``: the box of the key features bounds alpha below by 0),
  ``none`` (unknown only).
  Matrix form: ``method = "entries"``, ``shape, scale, matrix, matrix_sha256,
  argmin`` (first index of the minimum entry), ``min_sign``.
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping

from certify.checkers.common import expand_grams, guarded
from certify.checkers.rank.evidence import KINDS, matrix_sha256  # noqa: F401 (the area's public names)

#: kind -> (module, function); a kind's module is loaded when a claim of that kind is checked
_CHECKS = {"exact_rank": ("exact", "check_exact_rank"), "eps_rank": ("eps", "check_eps_rank"),
           "numerical_rank": ("numerical", "check_numerical_rank"),
           "code_rank": ("code", "check_code_rank"), "nonnegative": ("nonnegative", "check_nonnegative")}


def trusted(claim: Mapping[str, Any], cert: Mapping[str, Any] | None = None) -> list[str]:
    """The evidence fields this claim declares trusted (taken as stated, not re-derived)."""
    ev = claim.get("evidence")
    t = ev.get("trusted") if isinstance(ev, dict) else None
    if not isinstance(ev, dict) or not isinstance(t, list):
        return []
    fs = ev.get("features_sha256")
    ident = f" (summaries of the features with sha256 {fs.get('phi_q', '?')[:16]}..., " \
            f"{fs.get('phi_k', '?')[:16]}..., not embedded)" if isinstance(fs, dict) else ""
    return [f"{name}{ident}" for name in t if isinstance(name, str)]


def check(claim: Mapping[str, Any], cert: Mapping[str, Any] | None = None, *,
          matrix: Any = None) -> list[str]:
    """Re-derive one claim's verdict from its evidence; ``matrix`` supplies the
    integer matrix of a matrix-form claim whose evidence does not embed it."""
    where = _CHECKS.get(str(claim.get("kind")))
    if where is None:
        return [f"certify.checkers.rank does not check kind {claim.get('kind')!r}"]
    if not isinstance(claim.get("evidence"), dict) or not isinstance(claim.get("parameters"), dict):
        return ["parameters and evidence must be objects"]
    fn = getattr(importlib.import_module(f"certify.checkers.rank.{where[0]}"), where[1])

    def expanded(claim: Mapping[str, Any], cert: Mapping[str, Any], matrix: Any) -> list[str]:
        return fn(expand_grams(claim, cert), cert, matrix)     # Grams packed or named: as rows
    return guarded(expanded)(claim, cert or {}, matrix)
