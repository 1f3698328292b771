"""Output safety: the tool never deletes or overwrites a file it did not write.

Rules (documented in the README, "Output folders and files"):

* An output **folder** (``report``, ``checkpoint``, ``checkpoint --batch``,
  ``demo`` ``--out DIR``) is either new (created, with its missing parents),
  empty, or a previous output of the *same* command, recognised by the manifest
  :data:`MANIFEST` the tool writes into every folder it owns. The manifest names
  the command that wrote the folder (one of :data:`COMMANDS`) and the entries it
  made; it is written by :func:`write_manifest` alone, called by
  :meth:`Stage.commit`, so no writer can label its folder as another command's.
  Ownership is decided by the manifest alone, never guessed from the files'
  content: anything else -- a folder holding a ``thesis.tex``, or a
  ``README.md`` that happens to begin with "# certify" -- is refused with exit 2
  before any work starts.
* An output **file** (``--out FILE``) is overwritten only when it is one of the
  tool's own files: a certificate, a kernel file or a family file (recognised by
  its ``schema``/``format`` field), or a file listed in the folder's manifest.
* A folder is built in a *stage* folder next to it,
  ``.NAME.stage.XXXX/``, holding a lock file with the pid and start time of the
  run. The old folder is moved into the stage, the new one renamed into place,
  then the stage removed: ``--out`` is always either the old or the new
  complete folder. A later run removes the stages of dead runs (restoring a
  moved-aside old folder when the new one never arrived) and never touches
  the stage of a live run.

Every check raises :class:`certify.errors.InputError` naming the user's path.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable

from certify.core.errors import InputError
from certify.core.files import exclusive_temp

MANIFEST = ".certify-manifest.json"
MANIFEST_FORMAT = "certify-attention/output-folder/2"
#: earlier manifests (read, never written); see :func:`manifest_command`
OLD_MANIFEST_FORMATS = ("certify-attention/output-folder/1",)
#: the commands that write an output folder, as their manifests name them
COMMANDS = ("report", "checkpoint", "checkpoint --batch", "demo")
LOCK = "lock.json"
OUR_FORMATS = ("certify-attention/certificate/3", "certify-attention/certificate/2",
               "certify-attention/certificate/1",
               "certify-attention/kernel/1",
               "certify-attention/family/1")


# ---------------------------------------------------------------- recognising our files

def _json_format(path: Path) -> str | None:
    try:
        if path.stat().st_size > 256 << 20:
            return None
        obj = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if isinstance(obj, dict):
        v = obj.get("schema") or obj.get("format")
        return v if isinstance(v, str) else None
    return None


def _npz_is_ours(path: Path) -> bool:
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return bool(names & {"kernel_meta.npy", "family_meta.npy", "meta.npy"})


def is_our_file(path: Path) -> bool:
    """Is ``path`` a file this tool writes (by its content, or listed in a manifest)?"""
    path = Path(path)
    if not path.is_file():
        return False
    if path.name in _listed(path.parent):
        return True
    if path.suffix == ".json":
        return _json_format(path) in OUR_FORMATS
    if path.suffix == ".npz":
        return _npz_is_ours(path)
    return False


def _listed(folder: Path) -> set[str]:
    m = read_manifest(folder)
    return set(m.get("files", [])) if m else set()


def read_manifest(folder: Path) -> dict | None:
    try:
        obj = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(obj, dict) or obj.get("format") not in (MANIFEST_FORMAT, *OLD_MANIFEST_FORMATS):
        return None
    if not isinstance(obj.get("files", []), list):
        return None
    return obj


def manifest_command(m: dict) -> str | None:
    """The command that wrote a folder, by its manifest. Manifests of format 1
    written by ``certify checkpoint`` on a third-party checkpoint (and the
    adapter-spec example) named ``report``; their file list (``heads.json``,
    which ``certify report`` never writes) tells them apart."""
    cmd = m.get("command")
    if m.get("format") in OLD_MANIFEST_FORMATS and cmd == "report" \
            and "heads.json" in m.get("files", []):
        return "checkpoint"
    return cmd if isinstance(cmd, str) else None


def write_manifest(folder: Path, command: str) -> dict:
    """Write ``folder``'s manifest: ``command`` (one of :data:`COMMANDS`) wrote
    every entry now in it. The one place a manifest is written."""
    if command not in COMMANDS:
        raise ValueError(f"no output folder is written by {command!r}")
    files = sorted(n for n in os.listdir(folder) if n != MANIFEST)
    m = {"format": MANIFEST_FORMAT, "command": command, "files": files}
    (Path(folder) / MANIFEST).write_text(json.dumps(m, indent=1) + "\n")
    return m


# ---------------------------------------------------------------- checks before work

#: the longest file name most file systems take (NAME_MAX)
NAME_MAX = 255
#: what a stage or temporary name adds to the user's name (``.NAME.stage.XXXXXXXX``,
#: ``.NAME.XXXXXXXX.tmp``)
STAGE_EXTRA = len("..stage.") + 8


def _check_name(path: Path, shown: str) -> None:
    """Every part of ``path`` fits the file system, and so does the stage or
    temporary name built next to the last one: refused before any work."""
    for part in path.parts:
        if len(os.fsencode(part)) > NAME_MAX:
            raise InputError(f"--out {shown}: the name {part[:40]}... is longer than "
                             f"{NAME_MAX} bytes")
    if path.name and len(os.fsencode(path.name)) > NAME_MAX - STAGE_EXTRA:
        raise InputError(f"--out {shown}: the name {path.name[:40]}... is longer than "
                         f"{NAME_MAX - STAGE_EXTRA} bytes (certify builds its output next to "
                         f"it under a longer name)")

def _check_parent(path: Path, what: str) -> None:
    """The nearest existing ancestor must be a writable folder."""
    anc = path.parent
    while not anc.exists():
        if anc.parent == anc:
            break
        anc = anc.parent
    if anc.exists() and not anc.is_dir():
        raise InputError(f"{what} {path}: {anc} is not a folder")
    _probe(anc, what, path)


def _probe(folder: Path, what: str, path: Path) -> None:
    """Create and remove a file in ``folder``: the one reliable writability test
    (permissions, read-only file systems, pseudo file systems, also for root)."""
    try:
        fd, tmp = exclusive_temp(folder, ".certify-probe.")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        from certify.core.errors import os_error_line
        raise InputError(f"{what} {path}: cannot write in folder {folder} "
                         f"({os_error_line(OSError(exc.errno, exc.strerror))})") from None


def check_out_file(path: str | os.PathLike, *, suffixes: tuple[str, ...] = ()) -> Path:
    """Check an output file before any work: its folder can be written, and an
    existing file there is one of ours. Returns the path."""
    p = Path(path)
    if not str(path) or str(path).endswith(("/", os.sep)):
        raise InputError(f"--out {path}: expected a file name, got a folder")
    if suffixes and p.suffix.lower() not in suffixes:
        raise InputError(f"--out {path}: must end in {' or '.join(suffixes)}")
    _check_name(p, str(path))
    if p.is_dir():
        raise InputError(f"--out {path} is an existing folder; give a file name")
    if p.exists() or p.is_symlink():
        if not p.is_file():
            raise InputError(f"--out {path} exists and is not a regular file")
        if not is_our_file(p):
            raise InputError(f"--out {path} exists and was not written by certify; "
                             f"refusing to overwrite it (remove it or choose another name)")
        _probe(p.parent, "--out", p)
        return p
    _check_parent(p, "--out")
    return p


def check_out_dir(path: str | os.PathLike, command: str) -> Path:
    """Check an output folder before any work: new, empty, or a previous output
    of ``command``. Returns the path."""
    if command not in COMMANDS:
        raise ValueError(f"no output folder is written by {command!r}")
    p = Path(path)
    here = Path.cwd().resolve()
    if not str(path) or p.resolve() == Path(p.resolve().anchor):
        raise InputError(f"--out {path}: give a folder of its own (not the file system's root)")
    if p.resolve() == here:
        raise InputError(f"--out {path}: give a folder of its own (not the current folder)")
    if p.resolve() in here.parents:
        raise InputError(f"--out {path}: give a folder of its own (not a folder that holds "
                         f"the current one)")
    _check_name(p, str(path))
    if p.exists() or p.is_symlink():
        if p.is_symlink() or not p.is_dir():
            raise InputError(f"--out {path} exists and is not a folder")
        try:
            names = [n for n in os.listdir(p)]
        except OSError as exc:
            raise InputError(f"--out {path}: cannot list it ({exc.strerror})") from None
        if names:
            m = read_manifest(p) or _old_batch_manifest(p, names)
            if m is not None:
                if manifest_command(m) != command:
                    raise InputError(f"--out {path} holds the output of 'certify {manifest_command(m)}', "
                                     f"not 'certify {command}'; choose another folder")
                foreign = sorted(set(names) - set(m.get("files", [])) - {MANIFEST})
                if foreign:
                    raise InputError(f"--out {path} holds files certify did not write "
                                     f"({', '.join(foreign[:3])}{'...' if len(foreign) > 3 else ''}); "
                                     f"refusing to replace it")
            else:
                raise InputError(f"--out {path} is a folder without certify's manifest "
                                 f"({MANIFEST}) that holds files; refusing to replace it "
                                 f"(give a new or empty folder)")
        _probe(p.parent, "--out", p)
        return p
    _check_parent(p, "--out")
    return p


def _old_batch_manifest(p: Path, names: list[str]) -> dict | None:
    """A ``checkpoint --batch`` folder written before batch folders had a
    manifest of their own: every entry a folder whose manifest names
    ``certify checkpoint``. Read as that manifest (owned by manifests alone)."""
    for n in names:
        sub = p / n
        m = read_manifest(sub) if sub.is_dir() and not sub.is_symlink() else None
        if m is None or manifest_command(m) != "checkpoint":
            return None
    return {"format": OLD_MANIFEST_FORMATS[0], "command": "checkpoint --batch", "files": names}


# ---------------------------------------------------------------- locks and stages

def _start_time(pid: int) -> str | None:
    """Start time of process ``pid`` (clock ticks since boot), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, start: str | None) -> bool:
    if pid == os.getpid():
        return True
    now = _start_time(pid)
    if now is not None:
        return start is None or now == start
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not Path("/proc/self/stat").exists()


def _stage_prefix(out: Path) -> str:
    return f".{out.name}.stage."


def clean_stale(out: Path) -> list[Path]:
    """Remove the stage folders of ``out`` left by dead runs; a moved-aside old
    folder inside one goes back to ``out`` when ``out`` is missing. Never touches
    a stage whose lock names a live process. Returns the removed stages."""
    removed: list[Path] = []
    parent = out.parent
    try:
        entries = list(parent.iterdir()) if parent.is_dir() else []
    except OSError:
        return removed
    for st in entries:
        if not st.name.startswith(_stage_prefix(out)) or not st.is_dir() or st.is_symlink():
            continue
        try:
            lock = json.loads((st / LOCK).read_text())
            pid, start = int(lock["pid"]), lock.get("start")
        except (OSError, ValueError, KeyError, TypeError):
            # no readable lock: a stage from before locks, or one being created;
            # only an old one is taken as stale
            try:
                if time.time() - st.stat().st_mtime < 3600:
                    continue
            except OSError:
                continue
            pid, start = -1, None
        if pid > 0 and _alive(pid, start):
            continue
        old = st / "old"
        if old.is_dir() and not out.exists():
            try:
                os.replace(old, out)
            except OSError:
                pass
        import shutil
        shutil.rmtree(st, ignore_errors=True)
        removed.append(st)
    return removed


class Stage:
    """A locked stage folder next to ``out``; ``stage.new`` is where the new
    output folder is built. Use as a context manager; :meth:`commit` swaps it in."""

    def __init__(self, out: str | os.PathLike, command: str):
        self.out = Path(out)
        self.command = command
        self.root: Path | None = None

    def __enter__(self) -> "Stage":
        self.out.parent.mkdir(parents=True, exist_ok=True)
        clean_stale(self.out)
        import tempfile
        self.root = Path(tempfile.mkdtemp(prefix=_stage_prefix(self.out), dir=self.out.parent))
        (self.root / LOCK).write_text(json.dumps({"pid": os.getpid(),
                                                  "start": _start_time(os.getpid()),
                                                  "time": time.time(), "out": str(self.out)}))
        self.new.mkdir()
        return self

    @property
    def new(self) -> Path:
        assert self.root is not None
        return self.root / "new"

    def commit(self) -> None:
        """Write the manifest, then replace ``out`` by ``new`` (old folder kept
        until the new one is in place)."""
        write_manifest(self.new, self.command)
        os.chmod(self.new, 0o755)
        check_out_dir(self.out, self.command)     # re-check: the user may have added files
        assert self.root is not None, "the stage is entered before it is committed"
        old = self.root / "old"
        if self.out.exists():
            os.replace(self.out, old)
        try:
            os.replace(self.new, self.out)
        except BaseException:
            if old.exists():
                os.replace(old, self.out)
            raise

    def __exit__(self, *exc: object) -> None:
        if self.root is not None:
            import shutil
            shutil.rmtree(self.root, ignore_errors=True)


def write_dir(out: str | os.PathLike, command: str, fill: Callable[[Path], None]) -> Path:
    """Check ``out``, build it with ``fill(folder)`` in a locked stage, swap it in."""
    out = check_out_dir(out, command)
    with Stage(out, command) as st:
        fill(st.new)
        st.commit()
    return out


def write_file(path: str | os.PathLike, data: bytes | str) -> None:
    """Atomically write one output file after :func:`check_out_file`."""
    from certify.core.files import atomic_write_bytes
    p = check_out_file(path)
    atomic_write_bytes(p, data.encode() if isinstance(data, str) else data)
