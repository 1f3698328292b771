"""The report files the repository holds: every ``*.json`` under ``reports/`` except in the folders
``.gitignore`` keeps out of it (``reports/demo/``, written by ``make demo``), so a test over the
committed certificates reads the same files on a clean clone as on a working machine."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def ignored_report_folders() -> list[Path]:
    """The folders under ``reports/`` that ``.gitignore`` names (lines ``reports/<folder>/``)."""
    lines = (ROOT / ".gitignore").read_text().splitlines()
    return [ROOT / line.strip().strip("/") for line in lines
            if line.strip().startswith("reports/") and line.strip().endswith("/")]


def report_json() -> list[Path]:
    """Every committed ``*.json`` under ``reports/``, sorted."""
    skip = ignored_report_folders()
    return sorted(p for p in (ROOT / "reports").rglob("*.json") if not any(d in p.parents for d in skip))
