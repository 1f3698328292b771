"""Certificates' stated Grams as JSON rows, for tests that change one entry: packed Grams
unpacked, and an eps-rank claim's ``grams_claim`` replaced by its own copy of the named
claim's Grams (both forms are the format's; the checker reads either)."""

from __future__ import annotations

import copy
from typing import Any

from certify.checkers.common import packed_matrix

GRAMS = ("gram_q", "gram_q_exponent", "gram_k", "gram_k_exponent")


def as_rows(cert: dict[str, Any]) -> dict[str, Any]:
    """``cert`` (changed in place, and returned) with every claim's Grams as its own rows."""
    claims = cert["claims"]
    for c in claims:
        ev = c.get("evidence") or {}
        if "grams_claim" in ev:
            other = claims[ev.pop("grams_claim")]["evidence"]
            ev.update({k: copy.deepcopy(other[k]) for k in GRAMS})
    for c in claims:
        ev = c.get("evidence") or {}
        for k in ("gram_q", "gram_k"):
            if isinstance(ev.get(k), dict):
                ev[k] = packed_matrix(ev[k], k)
    return cert


def claim_rows(claim: dict[str, Any]) -> dict[str, Any]:
    """One claim on its own (a certificate of that claim alone) with its Grams as rows."""
    return as_rows({"claims": [claim]})["claims"][0]
