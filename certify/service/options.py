"""A job's options, checked at the edge: before anything is stored.

Each command takes a fixed set of form fields (unknown ones are refused, as
configs are); each value is parsed and bounded here, with the library's own
limits (:mod:`certify.core.limits`), so a job never starts on an option it
would refuse. Every refusal is an :class:`InputError` whose message names
the field; the service answers it with 422.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from certify.core import limits as _limits
from certify.core.errors import InputError
from certify.service.uploads import matrix_shape

COMMANDS = ("checkpoint", "rank", "feasibility", "transcript", "verify")
#: file suffixes a job may upload, per command
UPLOAD_SUFFIXES = {
    "checkpoint": (".zip",),
    "rank": (".zip", ".npy", ".npz", ".safetensors", ".csv", ".json"),
    "feasibility": (".json", ".npz"),
    "verify": (".json",),
    "transcript": (),
}
#: the form fields each command takes (besides ``command`` and ``file``)
FIELDS = {
    "checkpoint": ("eps", "seed", "family"),
    "rank": ("tokens", "eps", "code", "seed"),
    "feasibility": ("family", "rank", "features", "time_limit", "seed"),
    "transcript": ("M", "s", "h", "q", "bits", "format", "seed", "time_limit"),
    "verify": (),
}
PICKLES = (".pkl", ".pickle", ".pt", ".pth", ".bin", ".ckpt")
BUILTIN_FAMILY = re.compile(r"^(paper-5\.1|ood-\d{1,2}-\d{1,2}-\d{1,2}-(train|test)"
                            r"|multilevel-\d{1,2}-\d{1,2}-\d{1,2}-\d{1,2})$")
EXACT = re.compile(r"^\d{1,12}(/\d{1,12})?$|^0?\.\d{1,12}$")


def _int(opts: Mapping[str, Any], key: str, lo: int, hi: int, default: int | None = None) -> int | None:
    v = opts.get(key, default)
    if v is None or v == "":
        return default
    text = str(v).strip()
    if not re.fullmatch(r"[+-]?\d{1,18}", text):
        raise InputError(f"{key} must be an integer in {lo}..{hi}, got {str(v)[:40]!r}")
    n = int(text)
    if not lo <= n <= hi:
        raise InputError(f"{key} must be in {lo}..{hi}, got {n}")
    return n


def _exact(opts: Mapping[str, Any], key: str) -> str | None:
    v = str(opts.get(key) or "").strip()
    if not v:
        return None
    if not EXACT.match(v):
        raise InputError(f"{key} must be an exact number like 1/1000 or 0.001, got {v[:40]!r}")
    _limits.parse_eps(v, key)
    return v


def _family(v: Any, key: str = "family") -> str:
    """A built-in family name the job would accept: its parameters are checked
    by the library's own :func:`check_family_name`, with the job's message."""
    from certify.core.families.registry import check_family_name
    name = str(v or "").strip()
    if not BUILTIN_FAMILY.match(name):
        raise InputError(f"{key} must be a built-in name (paper-5.1, ood-M-q-n-test, "
                         f"multilevel-M-s-h-q) or an uploaded file, got {name[:60]!r}")
    try:
        check_family_name(name)
    except InputError as exc:
        raise InputError(f"{key} {name}: {exc}") from None
    return name


def check_options(command: str, raw: Mapping[str, Any], filename: str | None,
                  job_seconds: float, upload: bytes | None = None) -> dict[str, Any]:
    """The job's options, checked and normalized; :class:`InputError` (one line
    naming the field) when they are not acceptable. ``raw`` holds the form's
    text fields; ``filename`` the upload's name (None: no file) and ``upload``
    its bytes, when read (a token set is checked against a matrix's shape)."""
    if command not in COMMANDS:
        raise InputError(f"command must be one of {', '.join(COMMANDS)}, got {str(command)[:40]!r}")
    unknown = sorted(set(raw) - set(FIELDS[command]) - {"command", "file"})
    if unknown:
        raise InputError(f"{unknown[0][:40]!r} is not an option of {command} "
                         f"(options: {', '.join(FIELDS[command]) or 'none'})")
    allowed = UPLOAD_SUFFIXES[command]
    if filename:
        suffix = Path(filename).suffix.lower()
        if suffix not in allowed:
            raise InputError(f"file: {command} accepts {', '.join(allowed) or 'no file'} uploads, "
                             f"not {suffix or 'a file without suffix'}"
                             + ("; pickles are never loaded" if suffix in PICKLES else ""))
    elif command in ("checkpoint", "rank", "verify"):
        raise InputError(f"file: {command} needs an uploaded file")
    search_max = max(1, int(job_seconds) - 5)
    o: dict[str, Any] = {}
    if command == "checkpoint":
        o["eps"] = _exact(raw, "eps") or "1/1000"
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
        fams = [f for f in str(raw.get("family") or "").replace(",", " ").split() if f]
        if len(fams) > 8:
            raise InputError(f"family: at most 8 families, got {len(fams)}")
        o["families"] = [_family(f) for f in fams]
    elif command == "rank":
        tokens = str(raw.get("tokens") or "").strip()
        if tokens:
            m = re.fullmatch(r"cube:(\d{1,2})", tokens)
            if not m:
                raise InputError(f"tokens must be cube:M, got {tokens[:40]!r}")
            _limits.check_int("cube_m", int(m.group(1)), "tokens cube:M")
            shape = matrix_shape(filename, upload) if filename and upload is not None else None
            n = 1 << int(m.group(1))
            if shape is not None and (shape[0] != n or shape[1] != n):
                # the job's own message (certify.sources.files)
                raise InputError(f"tokens: token set cube:{int(m.group(1))} has {n} tokens; the "
                                 f"kernel is {shape[0]} x {shape[1]}")
        o["tokens"] = tokens or None
        o["eps"] = _exact(raw, "eps")
        code = str(raw.get("code") or "").strip()
        if code and code != "paper-5.1":
            raise InputError(f"code must be paper-5.1 (or empty), got {code[:40]!r}")
        o["code"] = code or None
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
    elif command == "feasibility":
        o["family"] = None if filename else _family(raw.get("family") or "paper-5.1")
        o["rank"] = _int(raw, "rank", 1, 64)
        if o["rank"] is None:
            raise InputError("rank: feasibility needs a rank")
        feats = str(raw.get("features") or "real")
        if feats not in ("real", "nonnegative"):
            raise InputError(f"features must be real or nonnegative, got {feats[:40]!r}")
        o["features"] = feats
        o["time_limit"] = _int(raw, "time_limit", 1, search_max, min(30, search_max))
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
    elif command == "transcript":
        for k, lim in (("M", "family_m"), ("s", "family_q"), ("h", "family_q"), ("q", "family_q")):
            o[k] = _int(raw, k, 1, _limits.limit(lim))
            if o[k] is None:
                raise InputError(f"{k}: transcript needs {k}")
        from certify.core.families.registry import multilevel_code_check
        try:                # the job's family: its checks and messages
            multilevel_code_check(o["M"], o["s"], o["h"], o["q"])
        except InputError as exc:
            raise InputError(f"M, s, h, q: {exc}") from None
        o["bits"] = _int(raw, "bits", 1, 32)
        fmt = str(raw.get("format") or "").strip()
        if fmt and fmt not in ("fp8-e4m3", "fp8-e5m2", "bf16", "fp16"):
            raise InputError(f"format must be fp8-e4m3, fp8-e5m2, bf16 or fp16, got {fmt[:40]!r}")
        o["format"] = fmt or None
        if (o["bits"] is None) == (o["format"] is None):
            raise InputError("bits, format: transcript needs exactly one of them")
        o["seed"] = _int(raw, "seed", 0, 2**31, 0)
        o["time_limit"] = _int(raw, "time_limit", 1, search_max, min(60, search_max))
    return o
