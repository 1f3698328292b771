"""The README is a front door and ``docs/`` holds the reference: the README stays
short and links every page, every relative link of the README and of ``docs/``
reaches a file (and a heading, where it names one), and every citation of the
design in code, tests and ``pyproject.toml`` names ``docs/design.md`` and a section
it has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REFERENCE = ("commands.md", "trust.md", "layouts.md", "service.md", "benchmarks.md", "paper.md", "design.md")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces -> '-'."""
    h = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_the_readme_is_short_and_links_every_reference_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    for name in REFERENCE:
        assert (ROOT / "docs" / name).is_file(), name
        assert f"](docs/{name})" in text, f"README does not link docs/{name}"
    assert text.index("## Code map") < text.index("## A five-minute tour")


def test_the_code_map_names_every_package():
    text = (ROOT / "README.md").read_text()
    mapped = set(re.findall(r"^\| `([\w/]+)/` \|", text, re.M))
    packages = {f"certify/{p.parent.name}" for p in (ROOT / "certify").glob("*/__init__.py")}
    assert packages | {"models", "solvers"} == mapped


def test_every_relative_link_reaches_a_file_and_its_heading():
    bad = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                bad.append((page.name, target))
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append((page.name, target))
    assert bad == []


def test_every_design_citation_names_docs_design_and_a_section_it_has():
    sections = {m.group(1) for m in re.finditer(r"^#+ (.+?)\s*$", (ROOT / "docs" / "design.md").read_text(), re.M)}
    files = [ROOT / "pyproject.toml", *ROOT.glob("certify/**/*.py"), *ROOT.glob("models/**/*.py"),
             *ROOT.glob("solvers/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("benchmarks/*.py")]
    cited = 0
    for f in files:
        text = f.read_text()
        assert not re.search(r"(?<!docs/)DESIGN\.md", text), f"{f.relative_to(ROOT)} cites a design file outside docs/"
        for section in re.findall(r"docs/design\.md, \"([^\"]+)\"", text):
            cited += 1
            assert any(s.startswith(section) for s in sections), (str(f.relative_to(ROOT)), section)
    assert cited >= 4
