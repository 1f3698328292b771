"""Every model in a folder, one task each (``certify checkpoint --batch DIR``).

A folder of models is named with ``--batch`` so it is never confused with one
model's folder. What counts as a model, in the sorted order of the names
(:func:`find_models`):

* a ``models/`` checkpoint of this project: ``X.json`` with ``"format":
  "certify-attention/checkpoint/1"`` and ``X.safetensors``;
* a sub-folder that holds a model: a Hugging Face style folder (``config.json``
  with ``model.safetensors``, its shards or ``pytorch_model.bin``), a folder
  with one weights file (``.safetensors``, ``.pt``, ``.pth``, ``.bin``,
  ``.ckpt``) and its config, a folder whose adapter spec (a JSON file with
  ``"format": "certify-attention/adapter/1"``) describes its one weights file,
  or a Hugging Face cache repo folder ``models--org--name`` (so ``--batch
  ~/.cache/huggingface/hub`` certifies every cached model);
* a weights file directly in the folder.

Other files and folders are ignored (and listed). Every model is certified as
by ``certify checkpoint PATH`` (:func:`certify.checkpoints.dispatch.certify_path`:
the layout detectors decide what it is; one task each, in process, or on Ray
with ``--workers N`` / ``--ray-address``). A model that cannot be read (corrupt
weights, keys that fit several layouts: exit 2) or that holds no certifiable
head (softmax, data-dependent gating: exit 3) is reported with its one-line
reason and the others are certified all the same. With ``--out OUT`` each
certificate and report goes to ``OUT/NAME/`` (a third-party model's with its
``heads.md``) and the summary table to ``OUT/summary.md``; ``OUT`` is one
output folder of ``certify checkpoint --batch`` (its manifest names the command
and the sub-folders), checked before any work and replaced in one atomic step.
Exit code: the worst over the models (0 only when every claim of every model is
proved).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Sequence

from certify.core.errors import InputError, UncertifiableError

#: the command named by the manifest of a batch's ``--out`` folder
BATCH = "checkpoint --batch"
#: the format of an adapter spec (models.adapters)
ADAPTER_FORMAT = "certify-attention/adapter/1"
_WEIGHTS = (".safetensors", ".pt", ".pth", ".bin", ".ckpt")


@dataclass(frozen=True)
class BatchItem:
    """One model of a batch: its name (the sub-folder of ``--out``), the path
    ``certify checkpoint`` reads and the adapter spec that describes it, if any."""

    name: str
    path: Path
    spec: Path | None = None


def _json_format(path: Path) -> Any:
    try:
        if path.stat().st_size > 16 << 20:
            return None
        obj = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError, UnicodeDecodeError):
        return None
    return obj.get("format") if isinstance(obj, dict) else None


def _folder_item(d: Path) -> tuple[BatchItem | None, str]:
    """The model a sub-folder holds, or ``(None, why it is not one)``."""
    from certify.sources.weights import weights_file
    if d.name.startswith("models--") and (d / "snapshots").is_dir():
        return BatchItem(d.name[len("models--"):].replace("--", "/", 1), d), ""
    specs = sorted(f for f in d.glob("*.json") if _json_format(f) == ADAPTER_FORMAT)
    try:
        w = weights_file(d)
    except InputError as exc:
        return None, str(exc)
    if len(specs) > 1:
        return None, f"{len(specs)} adapter specs ({', '.join(s.name for s in specs)}): keep one per folder"
    if specs:
        return BatchItem(d.name, w, specs[0]), ""
    return BatchItem(d.name, d), ""


def find_models(folder: str) -> tuple[list[BatchItem], list[str]]:
    """``(models, ignored names)`` of a batch folder (module docstring); bad input
    when it holds none."""
    from models.checkpoint import FORMAT

    d = Path(folder)
    if not d.is_dir():
        raise InputError(f"--batch {folder}: not a folder")
    items: list[BatchItem] = []
    ignored: list[str] = []
    paired: set[str] = set()
    for js in sorted(d.glob("*.json")):
        st = js.with_suffix(".safetensors")
        if st.is_file() and _json_format(js) == FORMAT:
            items.append(BatchItem(js.stem, js.with_suffix("")))
            paired |= {js.name, st.name}
    for p in sorted(d.iterdir()):
        if p.name in paired or p.name.startswith("."):
            continue
        if p.is_dir():
            item, why = _folder_item(p)
            if item is None:
                ignored.append(f"{p.name}/ ({why})")
            else:
                items.append(item)
        elif p.is_file() and p.suffix in _WEIGHTS:
            from certify.sources.load import kind_of
            if kind_of(p) == "weights":
                items.append(BatchItem(p.name, p))
            else:
                ignored.append(f"{p.name} (a kernel or matrix file: `certify rank` reads it)")
        else:
            ignored.append(p.name)
    if not items:
        raise InputError(f"--batch {folder}: no model in the folder (a models/ checkpoint X.json + "
                         "X.safetensors, a model folder, or a weights file)")
    names: dict[str, int] = {}
    out = []
    for it in sorted(items, key=lambda i: i.name):
        n = names[it.name] = names.get(it.name, 0) + 1
        out.append(it if n == 1 else BatchItem(f"{it.name}-{n}", it.path, it.spec))
    return out, ignored


def _one(path: str, spec: str | None, families, eps, seed, command, name: str,
         stage: str | None = None):
    """One model's ``(kind, result)``, or ``(exit code, one-line reason)`` when it
    cannot be read (2) or holds nothing certifiable (3): one bad model never stops
    the others. ``stage``: the batch's staging folder on this machine, where the
    model's report folder ``stage/name`` is written here, by the worker that made it."""
    from certify.checkpoints.dispatch import certify_path

    try:
        res = certify_path(path, spec=spec, families=families, eps=eps, seed=seed,
                           command=[*command, "#", name])
    except UncertifiableError as exc:
        return 3, str(exc)
    except InputError as exc:
        return 2, str(exc)
    if stage is not None:
        _write_report(res[0], res[1], Path(stage) / name)
    return res


def _write_report(kind: str, result: Any, folder: Path) -> None:
    """One model's report folder (certificate, report, figures)."""
    if kind == "weights":
        from certify.checkpoints.heads import write_out
        write_out(result, str(folder))
    else:
        from certify.report.build import build_with_certificate
        build_with_certificate(result.certificate.dumps(), folder, command="checkpoint")


@dataclass(frozen=True)
class BatchEntry:
    name: str
    path: Path
    kind: str | None                      # "models" or "weights"; None: not certified
    result: Any                           # CheckpointResult | HeadsResult | None
    out: Path | None                      # the report folder, when one was written
    error: str | None = None              # why it was not certified
    error_code: int = 2

    def exit_code(self) -> int:
        return self.error_code if self.result is None else self.result.certificate.exit_code()

    def row(self) -> dict[str, Any]:
        """The summary table's row of this model."""
        from certify.core.verdict import overall
        if self.result is None:
            return {"checkpoint": self.name, "path": str(self.path), "verdict": None,
                    "exit_code": self.exit_code(), "error": self.error}
        cert = self.result.certificate
        row: dict[str, Any] = {"checkpoint": self.name, "path": str(self.path),
                               "verdict": overall(c.verdict for c in cert.claims).value,
                               "exit_code": cert.exit_code(), "claims": len(cert.claims)}
        if self.kind == "weights":
            rows = self.result.rows
            row.update({"library": self.result.library,
                        "heads_certified": sum(r.status == "certified" for r in rows),
                        "heads_refused": sum(r.status == "refused" for r in rows),
                        "heads_out_of_reach": sum(r.status == "out of reach" for r in rows)})
        else:
            row["library"] = "certify-attention (models/)"
        if self.out is not None:
            row["out"] = str(self.out)
        return row


def summary_table(entries: Sequence[BatchEntry]) -> str:
    """One markdown table: model, library, heads, verdict, exit code, reason."""
    lines = ["| model | library | heads certified / refused / out of reach | claims | verdict | exit | reason |",
             "|---|---|---|---|---|---|---|"]
    for e in entries:
        r = e.row()
        heads = (f"{r['heads_certified']} / {r['heads_refused']} / {r['heads_out_of_reach']}"
                 if "heads_certified" in r else ("1 / 0 / 0" if r.get("verdict") else "-"))
        cells = [r["checkpoint"], r.get("library", "-"), heads, str(r.get("claims", "-")),
                 r["verdict"] or "not certified", str(r["exit_code"]), r.get("error") or ""]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


def run_batch(folder: str, *, families: Sequence[str] = (), eps: Fraction, seed: int = 0,
              command: Sequence[str] = (), engine=None,
              out: str | None = None) -> tuple[list[BatchEntry], list[str]]:
    """Every model of ``folder`` (one task each on ``engine``), in the sorted order
    of their names, with ``OUT/NAME/`` report folders and ``OUT/summary.md`` when
    ``out`` is given; ``(entries, ignored names)``."""
    from certify.core import outputs
    from certify.core.engine import Engine

    items, ignored = find_models(folder)
    if out:
        outputs.check_out_dir(out, BATCH)
    engine = engine if engine is not None else Engine(1, progress=False)
    # the report folders are written by the task that certified the model (in parallel)
    # when it runs on this machine; a cluster's workers hand their results back instead
    local = engine.address is None

    def certify_all(stage: Path | None) -> list[BatchEntry]:
        st = str(stage) if stage is not None and local else None
        results = engine.map(_one, [(str(i.path), str(i.spec) if i.spec else None, tuple(families), eps,
                                     seed, tuple(command), i.name, st) for i in items], label="checkpoints")
        entries = []
        for it, res in zip(items, results):
            if isinstance(res[0], int):
                entries.append(BatchEntry(it.name, it.path, None, None, None, res[1], res[0]))
            else:
                if stage is not None and st is None:
                    _write_report(res[0], res[1], stage / it.name)
                entries.append(BatchEntry(it.name, it.path, res[0], res[1], Path(out) / it.name if out else None))
        return entries

    if not out:
        return certify_all(None), ignored
    entries: list[BatchEntry] = []

    def fill(new: Path) -> None:
        entries.extend(certify_all(new))
        (new / "summary.md").write_text(f"# certify checkpoint --batch {folder}\n\n"
                                        + summary_table(entries) + "\n")
    outputs.write_dir(out, BATCH, fill)
    return entries, ignored
