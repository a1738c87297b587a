"""README.md and docs/: short, linked, and no hand-typed measurement.

A figure with a unit of measurement (req/s, ms, ×, %, MB) in README.md or docs/*.md must be one
the shipped reference's generated files show (results/reference/summary.md and details/), so a
re-run that changes it makes this test fail instead of leaving a stale number behind.
"""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
REFERENCE = ROOT / "results" / "reference"
# a number (1,234.5 or 12) directly followed by a unit of measurement
FIGURE = re.compile(r"(?<![\w.\-–])(\d[\d,]*(?:\.\d+)?)\s?(req/s|rps|ms|×|%|MB)(?![\w/])")
# figures that are not measurements: stated rules, defaults and confidence levels
NOT_MEASURED = {
    "95 %",
    "97.5 %",
    "5 %",
    "99 %",
    "50 %",
    "80 %",
    "120 %",
    "150 %",
    "100 ms",
    "50 ms",
}


def _generated() -> str:
    files = [REFERENCE / "summary.md", *sorted((REFERENCE / "details").glob("*.md"))]
    return "\n".join(p.read_text() for p in files)


def figures(text: str) -> list[str]:
    """Every 'number unit' in a markdown text, outside code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return [f"{m.group(1)} {m.group(2)}" for m in FIGURE.finditer(prose)]


def test_the_readme_fits_in_200_lines() -> None:
    """What it answers, the two commands, the questions and where the answers are: no more."""
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_measured_figure_is_in_the_generated_reference(doc: Path) -> None:
    """A measurement quoted in prose is found in the reference's generated files."""
    generated = _generated()
    missing = []
    for figure in figures(doc.read_text()):
        if figure in NOT_MEASURED:
            continue
        number = figure.split(" ")[0]
        if not re.search(rf"(?<![\d,.]){re.escape(number)}(?![\d,])\s?", generated):
            missing.append(figure)
    assert missing == [], f"{doc.name}: figures no generated file shows: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_stay_inside_the_repository_and_exist(doc: Path) -> None:
    """Every relative link of the docs points at a file of this repository."""
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if "://" in target:
            continue
        path = (doc.parent / target).resolve()
        assert path.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
        assert path.exists(), f"{doc.name}: {target} does not exist"


def test_the_figure_check_can_fail() -> None:
    """A typed figure that no generated file shows is found."""
    assert figures("granian serves 98,765.4 req/s here, 3.7× faster") == [
        "98,765.4 req/s",
        "3.7 ×",
    ]
