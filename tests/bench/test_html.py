"""RESULTS/index.html in a real browser: Debian's chromium, headless, opens the file written by
`make report` with no console message (no script error), and the page's rendered text says
what summary.md says. `make test` installs chromium (bench/setup.sh, PYWEBBENCH_TEST=1)."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.core.record import load_records
from bench.report.export import points
from bench.report.summary import write_summary

RECORDS = Path(__file__).resolve().parents[1] / "fixtures" / "records"
CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("PYWEBBENCH_TEST") != "1",
    reason="chromium not installed (make test installs it)",
)


def _browse(page: Path) -> tuple[str, str]:
    """The DOM after the page's scripts ran, and chromium's log (console messages included)."""
    assert CHROMIUM is not None, "chromium missing: run `PYWEBBENCH_TEST=1 bash bench/setup.sh`"
    done = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout, done.stderr


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def _glance_row_md(summary: str, heading: str = "At a glance") -> list[str]:
    """The first data row of the summary's first table under `heading`, as plain cells."""
    after = summary.split(f"## {heading}", 1)[1]
    rows = [line for line in after.splitlines() if line.startswith("|")]
    cells = rows[2].strip("|").split("|")  # header, alignment, first row
    return [c.strip().replace("**", "").replace("`", "") for c in cells]


def _glance_row_dom(dom: str, heading: str = "At a glance") -> list[str]:
    after = dom.split(f">{heading}</h2>", 1)[1]
    body = after.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    return [_text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = Path(shutil.copytree(RECORDS, tmp_path_factory.mktemp("html") / "results"))
    write_summary(results)
    return results


def test_page_opens_without_console_errors(report: Path) -> None:
    """No script error or console message while the page loads and its scripts run."""
    dom, log = _browse(report / "index.html")
    console = [line for line in log.splitlines() if ":CONSOLE" in line]
    assert console == []
    assert "js-plotly-plot" in dom and "main-svg" in dom  # plotly drew the charts


def test_rendered_page_says_what_the_summary_says(report: Path) -> None:
    """The At a glance row rendered in the browser is the summary's; the filters' script
    counted every exported point."""
    dom, _ = _browse(report / "index.html")
    summary = (report / "summary.md").read_text()
    assert _glance_row_dom(dom) == _glance_row_md(summary)
    records, _ = load_records(report)
    total = len(points(records))
    shown = _text(re.search(r'<span id="shown-count">(.*?)</span>', dom).group(1))
    assert shown == f"{total} of {total} points shown"


def test_the_rendered_page_opens_with_the_recommendation(report: Path) -> None:
    """The first recommendation rendered in the browser is the summary's first, and it comes
    before the charts: the answer first."""
    dom, _ = _browse(report / "index.html")
    summary = (report / "summary.md").read_text()
    row = _glance_row_dom(dom, "Recommendations")
    assert row and row == _glance_row_md(summary, "Recommendations")
    assert dom.index(">Recommendations</h2>") < dom.index('id="explore"')


def test_index_is_self_contained(report: Path) -> None:
    """No network: no external script, stylesheet or image; the PNGs are embedded."""
    page = (report / "index.html").read_text()
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', page)
    assert 'src="plots/' not in page and "data:image/png;base64," in page
    assert oct((report / "index.html").stat().st_mode & 0o777) == "0o644"


def test_a_folded_table_is_a_table_in_the_page_too(tmp_path: Path) -> None:
    """A study's rounds folded under <details markdown="1"> (bench.studies.network) are a
    table in index.html as on GitHub, not pipes in raw HTML."""
    from bench.report.html import _sections_html

    text = (
        "## Study: x\n\nabove\n\n"
        '<details markdown="1"><summary>Each round\'s run (2 runs)</summary>\n\n'
        "| arm | 2xx/s |\n|---|---:|\n| a (round 1) | 10 |\n\n</details>\n"
    )
    page = _sections_html(text, tmp_path, set())
    folded = page[page.index("<details") : page.index("</details>")]
    assert "<summary>Each round's run (2 runs)</summary>" in folded
    assert "<td>a (round 1)</td>" in folded and "| arm |" not in page
