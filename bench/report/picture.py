"""The picture of the HTML report in the README: RESULTS/index.html -> a PNG, by chromium.

Input: an index.html written by bench.report.html and the PNG's path (docs/report.png for
the shipped reference). Output: the PNG, replaced whole (written beside it, then renamed),
or one line saying why it was not taken. Debian's chromium, headless, as the HTML report's
own test opens the page (tests/bench/test_html.py); `make test` installs it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

# The browser window the picture shows: the report's first screen at 100 % zoom.
WINDOW = (1280, 1000)


def take(page: Path, png: Path, timeout_s: int = 120) -> str | None:
    """The picture of `page` saved as `png`; None when taken, else why not."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return "chromium is not installed (apt-get install chromium)"
    if not page.is_file():
        return f"{page} does not exist"
    partial = png.with_name(f".tmp-{png.name}")
    argv = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--virtual-time-budget=5000",
        f"--screenshot={partial}",
        page.resolve().as_uri(),
    ]
    try:
        subprocess.run(argv, capture_output=True, timeout=timeout_s, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        partial.unlink(missing_ok=True)
        return f"chromium failed: {exc.__class__.__name__}"
    if not partial.is_file() or partial.stat().st_size == 0:
        return "chromium wrote no picture"
    os.replace(partial, png)
    return None
