"""Models by Hugging Face hub id, read from the local cache (no network).

A researcher names a model ``org/name`` (``from_pretrained("org/name")``) and
keeps it in the Hugging Face cache (``$HF_HOME/hub/models--org--name/``: a
``snapshots/<commit>/`` folder per commit, its files symlinks into
``blobs/``, ``refs/<branch>`` holding a branch's commit). ``certify
checkpoint|rank|extract`` accept:

* ``org/name`` or ``org/name@revision`` (a branch, tag or full commit hash)
  that is not a local path: resolved with
  :func:`huggingface_hub.snapshot_download` and ``local_files_only=True`` (no
  network is ever used); a model not in the cache is bad input whose one line
  says how to download it (``hf download org/name``);
* the cache's repo folder ``.../models--org--name`` (its ``refs/main``, else
  its one snapshot);
* a snapshot folder ``.../models--org--name/snapshots/<commit>`` or a file in
  it.

The certificate names the files portably as ``hf://org/name@<commit>/<file>``
(the statement prints the repo id and the commit; ``inputs`` binds every file's
sha256), whatever folder the cache was in, and records ``environment.hub``
(repo id, revision asked, commit, files). ``certify verify
--replay-extraction`` finds such files by their sha256 in the cache (by repo id
and commit), beside the certificate or under ``--weights DIR``
(:func:`certify.checkers.sources.locate`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certify.checkers.sources import HUB_SCHEME, hub_cache_dir
from certify.core.errors import InputError

#: ``org/name`` or ``org/name@revision`` (the hub's repo id characters)
HUB_ID = re.compile(r"^(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(?:@(?P<rev>[\w./-]+))?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class HubSnapshot:
    """A model in the local cache: its repo id, the revision asked, the commit,
    the snapshot folder and the path to read (the folder or a file in it)."""

    repo_id: str
    revision: str | None
    commit: str
    folder: Path
    path: Path

    @property
    def prefix(self) -> str:
        """The portable name of the snapshot folder (``hf://org/name@commit``)."""
        return f"{HUB_SCHEME}{self.repo_id}@{self.commit}"

    def name(self, path: str | os.PathLike) -> str:
        """The portable name of a file of the snapshot (others are returned as given)."""
        return str(path).replace(str(self.folder), self.prefix, 1) \
            if str(path).startswith(str(self.folder)) else str(path)

    def rename(self, obj: Any) -> Any:
        """``obj`` (JSON-like) with every string naming the snapshot folder renamed."""
        folder = str(self.folder)
        if isinstance(obj, str):
            return obj.replace(folder, self.prefix) if folder in obj else obj
        if isinstance(obj, dict):
            return {self.rename(k): self.rename(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.rename(v) for v in obj)
        return obj

    def record(self, inputs: dict[str, str]) -> dict[str, Any]:
        """What ``environment.hub`` records: repo id, revision asked, commit, files by sha256."""
        return {"repo_id": self.repo_id, "revision": self.revision, "commit": self.commit,
                "files": {k: v for k, v in sorted(inputs.items()) if k.startswith(self.prefix + "/")}}

    def rename_certificate(self, cert):
        """The certificate with portable names: inputs, claims' parameters and info
        (statements rendered again from them), the environment; ``environment.hub`` set."""
        claims = [dataclasses.replace(c, statement=None, parameters=self.rename(dict(c.parameters)),
                                      info=self.rename(dict(c.info))) for c in cert.claims]
        inputs = {self.name(k): v for k, v in cert.inputs.items()}
        env = self.rename(dict(cert.environment))
        out = dataclasses.replace(cert, claims=claims, inputs=inputs, environment=env)
        out.environment["hub"] = self.record(out.bound_inputs())
        return out

    def rename_kernel(self, kernel):
        """The kernel with a portable source name in its provenance."""
        p = kernel.provenance
        prov = dataclasses.replace(p, source=self.name(p.source), details=self.rename(dict(p.details)))
        return dataclasses.replace(kernel, provenance=prov)


def _download_hint(repo: str, rev: str | None) -> str:
    r = f" --revision {rev}" if rev else ""
    return f"download it first: `hf download {repo}{r}` (or `huggingface-cli download {repo}{r}`)"


def from_cache_path(path: Path) -> HubSnapshot | None:
    """A cache folder or a file in one (module docstring), else None."""
    p = Path(os.path.abspath(path))
    for anc in [p, *p.parents]:
        if anc.name.startswith("models--") and anc.name.count("--") >= 2:
            repo = anc.name[len("models--"):].replace("--", "/", 1)
            if "--" in repo:                     # the hub forbids "--" in a repo id
                return None
            rel = p.relative_to(anc).parts
            if not rel:                          # the repo folder: refs/main, else its one snapshot
                return _snapshot(anc, repo, None, p)
            if rel[0] == "snapshots" and len(rel) >= 2 and COMMIT.fullmatch(rel[1]):
                return HubSnapshot(repo, None, rel[1], anc / "snapshots" / rel[1], p)
            return None
    return None


def _snapshot(repo_folder: Path, repo: str, rev: str | None, path: Path) -> HubSnapshot:
    snaps = repo_folder / "snapshots"
    ref = repo_folder / "refs" / (rev or "main")
    if rev and COMMIT.fullmatch(rev):
        commit = rev
    elif ref.is_file():
        commit = ref.read_text().strip()
    else:
        found = sorted(d.name for d in snaps.iterdir() if d.is_dir()) if snaps.is_dir() else []
        if len(found) != 1 or rev:
            raise InputError(f"{path}: no refs/{rev or 'main'} in the cache folder and "
                             + (f"{len(found)} snapshots ({', '.join(found[:3])}); name one: "
                                f"{repo}@<commit>" if found else "no snapshot"))
        commit = found[0]
    folder = snaps / commit
    if not COMMIT.fullmatch(commit) or not folder.is_dir():
        raise InputError(f"{path}: the cache names commit {commit[:40]!r}, whose snapshot folder is missing; "
                         + _download_hint(repo, rev))
    return HubSnapshot(repo, rev, commit, folder, folder)


def is_hub_id(source: str) -> bool:
    return HUB_ID.fullmatch(source) is not None and not source.startswith((".", "/"))


def resolve_hub_id(source: str) -> HubSnapshot:
    """``org/name[@revision]`` through the local cache with huggingface_hub
    (``local_files_only=True``); bad input naming the download command when absent."""
    m = HUB_ID.fullmatch(source)
    if m is None:
        raise InputError(f"{source}: not a hub id (org/name or org/name@revision)")
    repo, rev = m.group("repo"), m.group("rev")
    cache = hub_cache_dir()
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
    except ModuleNotFoundError:
        raise InputError(f"no such file: {source}; reading it as a hub id needs huggingface_hub: "
                         "pip install huggingface_hub") from None
    try:
        folder = snapshot_download(repo, revision=rev, cache_dir=str(cache), local_files_only=True)
    except HFValidationError as exc:
        raise InputError(f"no such file: {source} (and not a hub id: {str(exc).splitlines()[0][:120]})") from None
    except (LocalEntryNotFoundError, FileNotFoundError, OSError):
        what = f"{repo}@{rev}" if rev else repo
        raise InputError(f"no such file: {source}, and {what} is not in the local Hugging Face cache ({cache}): "
                         f"{_download_hint(repo, rev)}") from None
    folder_p = Path(str(folder))
    commit = folder_p.name
    if not COMMIT.fullmatch(commit):
        raise InputError(f"{source}: the cache returned {folder_p}, not a snapshot folder")
    return HubSnapshot(repo, rev, commit, folder_p, folder_p)


def resolve(source: str | os.PathLike) -> HubSnapshot | None:
    """The hub snapshot a source argument names (a hub id not present as a path,
    or a cache folder), else None (a plain local path)."""
    text = str(source)
    p = Path(text)
    if p.exists():
        return from_cache_path(p)
    if is_hub_id(text) and not any(Path(text + s).exists() for s in (".json", ".safetensors", ".npz", ".npy",
                                                                      ".csv")):
        return resolve_hub_id(text)
    return None


def hub_lines(record: Any) -> list[str]:
    """For people, from a certificate's ``environment.hub``: repo id, commit, files by sha256."""
    if not isinstance(record, dict):
        return []
    rev = record.get("revision")
    out = [f"hub model {record.get('repo_id')} at commit {record.get('commit')}"
           + (f" (revision {rev})" if rev and rev != record.get("commit") else "")]
    out += [f"  {k}: sha256 {v}" for k, v in (record.get("files") or {}).items()]
    return out
