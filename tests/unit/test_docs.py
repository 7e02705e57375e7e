"""The docs hold together: the README stays a short front door, the guides exist, every
relative link (and its anchor) lands, every repository path and ``MEMVAULT_`` variable the
guides name is real, and no file names a document the repository does not have."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from memvault.config import Settings
from memvault_local.options import StackOptions

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *GUIDES]

README_MAX_LINES = 220
#: Folders whose files are corpora or data: they quote made-up paths on purpose.
DATA = ("tests/data/",)
#: Top-level folders a path in a code span may start with; such a path must exist.
REPO_DIRS = (
    "layers",
    "wire",
    "clients",
    "local",
    "infra",
    "functions",
    "bench",
    "scripts",
    "tests",
    "docs",
    "events",
)

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`([^`\n]+)`")
VARIABLE = re.compile(r"\bMEMVAULT_[A-Z0-9_]*[A-Z0-9]\b")
#: A Markdown document named in text: a path with folders, or a bare upper-case name.
DOCUMENT = re.compile(r"(?<![\w/.{}<>-])((?:[\w-]+/)+[\w.-]+\.md|[A-Z][A-Z0-9_]*\.md)\b")


def prose(path: Path) -> str:
    """The page without its fenced code blocks (examples, not links)."""
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose(path).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


@cache
def repository_files() -> tuple[Path, ...]:
    """The tracked files, and the pages of this change even before they are committed."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        tracked = {ROOT / name for name in listed.split("\0") if name}
    except (OSError, subprocess.SubprocessError):
        skip = {".git", ".venv", "node_modules", "build", "cdk.out", "__pycache__"}
        tracked = {
            p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)
        }
    return tuple(sorted(p for p in tracked | set(PAGES) if p.is_file()))


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into docs/"
    )


def test_there_are_guides_and_the_readme_links_each_one() -> None:
    assert len(GUIDES) >= 6
    linked = {target.split("#")[0] for target in LINK.findall(prose(README))}
    missing = [g.name for g in GUIDES if f"docs/{g.name}" not in linked]
    assert not missing, f"README.md links no guide {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_two_headings_of_a_page_share_an_anchor(page: Path) -> None:
    """A link to a shared anchor lands on the first heading, whichever was meant."""
    headings = [
        slug(m.group(1))
        for line in prose(page).splitlines()
        if (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line))
    ]
    shared = sorted({h for h in headings if headings.count(h) > 1})
    assert not shared, f"{page.relative_to(ROOT)}: headings share the anchors {shared}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands_on_a_file_and_anchor_that_exist(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file, _, fragment = target.partition("#")
        landed = (page.parent / file).resolve() if file else page
        if not landed.exists():
            broken.append(f"{target} (no such file)")
        elif fragment and landed.suffix == ".md" and fragment not in anchors(landed):
            broken.append(f"{target} (no such heading in {landed.name})")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_exists(page: Path) -> None:
    missing = []
    for span in CODE_SPAN.findall(prose(page)):
        path = span.strip()
        if not re.fullmatch(rf"(?:{'|'.join(REPO_DIRS)})/[\w./+@-]*", path):
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{page.relative_to(ROOT)} names paths the repository lacks: {missing}"


def test_every_variable_the_pages_name_is_a_setting_or_read_by_the_code() -> None:
    named = {v for page in PAGES for v in VARIABLE.findall(page.read_text(encoding="utf-8"))}
    settings = {
        f"MEMVAULT_{name.upper()}"
        for model in (Settings, StackOptions)
        for name in model.model_fields
    }
    code = "\n".join(
        text
        for path in repository_files()
        if path.suffix in {".py", ".sh", ".mjs", ".ts"} or path.name == "Makefile"
        if (text := text_of(path)) is not None
    )
    unknown = sorted(v for v in named - settings if v not in code)
    assert not unknown, f"the docs name variables nothing reads: {unknown}"


def test_every_document_a_file_names_exists() -> None:
    """A document named in a file (``docs/deploy.md``, ``RELIABILITY.md``) is in the
    repository: relative paths from the root, bare upper-case names at the root. This is
    what keeps design documents that live elsewhere from being cited as if they were here."""
    missing = []
    for path in repository_files():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(DATA) or (text := text_of(path)) is None:
            continue
        for name in DOCUMENT.findall(text):
            if name.startswith("build/") or (ROOT / name).exists():
                continue
            missing.append(f"{rel}: {name}")
    assert not missing, f"documents the repository lacks: {missing}"


def test_no_file_cites_the_design_documents_that_live_outside_the_repository() -> None:
    # Built from parts, so that this file does not itself name them.
    outside = re.compile(r"(?<![\w/.-])(?:" + "API" + r"|" + "DESIGN" + r")\.md\b")
    citing = [
        path.relative_to(ROOT).as_posix()
        for path in repository_files()
        if (text := text_of(path)) is not None and outside.search(text)
    ]
    assert not citing, f"cite docs/api.md or docs/architecture.md instead: {citing}"
