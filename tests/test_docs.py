"""The README and docs/ keep their promises: the two commands first, CI's command named, every relative link live."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.paths import REPO

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"```.*?```", re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def prose(path: Path) -> str:
    return FENCE.sub("", path.read_text(encoding="utf-8"))


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return "".join(c for c in text if c.isalnum() or c in " -").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", prose(path), re.M)}


def test_the_readme_starts_with_make_run_then_make_test_and_names_cis_command() -> None:
    first_block = re.search(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert first_block is not None
    commands = [line.split("#")[0].strip() for line in first_block.group(1).splitlines()]
    assert commands[:2] == ["make run", "make test"]
    assert "make test" in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_the_readme_stays_short() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 150


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in LINK.findall(prose(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment}")
    assert broken == []
