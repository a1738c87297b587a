"""Machines compared on the summary's first screen (bench.report.arches): one line per workload
where native records of two machines answer the same point, ratios decided as `make compare`
decides them, what else differs said, emulated runs kept out, PRICE's dollars applied.

The second machine's records are DERIVED, not measured elsewhere: tests/fixtures/aa/head is a
second real session of this project's amd64 machine (5 trials per point, the A/A fixture);
`relabelled` copies it and changes only the labels of the machine (host name, identity, arch,
CPU model and, where a test says so, the CPU count). Every figure is a captured one, so the
ratios are this machine's session-to-session ratios (near 1.00×): the tests check the rules
and the rendering, never any arch's speed.
"""

import json
import shutil
from pathlib import Path

import pytest

from bench.core.record import load_records
from bench.core.validate import UsageError
from bench.core.variables import parse_price
from bench.report import arches
from bench.report.summary import render_report

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
AA = FIXTURES / "aa"
EMULATED = FIXTURES / "records" / "machine-a-emulated"


def relabelled(source: Path, results: Path, **meta: object) -> None:
    """Copy the records of `source` into `results/records`, relabelled as another machine:
    arch and host arch from meta's `arch`, metadata keys from the rest. Figures untouched."""
    (results / "records").mkdir(parents=True, exist_ok=True)
    arch = meta.pop("arch", None)
    for path in sorted(source.glob("*.json")):
        data = json.loads(path.read_text())
        if arch:
            data["arch"] = data["host_arch"] = arch
        data["metadata"].update(meta)
        (results / "records" / path.name).write_text(json.dumps(data))


GRAVITON = dict(
    arch="arm64", hostname="graviton", machine_id="9e9e9e9e9e9e", cpu_model="Neoverse-N1"
)


@pytest.fixture
def two_arches(tmp_path: Path) -> Path:
    """aa/base as measured (amd64, vm) and aa/head relabelled as an arm64 machine of 4 CPUs."""
    shutil.copytree(AA / "base", tmp_path / "records")
    relabelled(AA / "head", tmp_path, cpus_usable=4, cpu_count=4, **GRAVITON)
    return tmp_path


def test_one_line_per_workload_in_the_first_screen(two_arches: Path) -> None:
    """Two arches answering the same points: the section sits in the first 60 lines of
    summary.md, names both machines and what else differs, one line per workload."""
    records, _ = load_records(two_arches)
    summary = render_report(records, [])["summary.md"].splitlines()
    first = "\n".join(summary[:60])
    assert arches.TITLE in first
    assert "**arm64 (graviton·9e9e [Neoverse-N1]) vs amd64 (vm·a5ad [AMD EPYC])**" in first
    assert "differs: CPUs 2 vs 4, CPU AMD EPYC vs Neoverse-N1" in first
    assert "same: clock MHz not recorded, kernel 6.18.44-fc-v595, Python 3.11.7" in first
    workload_lines = [line for line in summary if line.startswith("- **")]
    assert [line.split("**")[1] for line in workload_lines[:2]] == ["light CPU", "database"]
    # the leading configuration of each workload on the base machine, c50, 5 trials a side
    light, database = workload_lines[:2]
    assert light.startswith("- **light CPU**, granian w2 t4 b1024 plaintext c50 direct: req/s ")
    assert database.startswith("- **database**, granian w2 t4 b1024 db c50 direct: req/s ")
    assert "(4 point(s) in both, req/s higher in" in light
    assert "per CPU (2 vs 4)" in light and "per $/h" not in light


def test_ratios_are_make_compares(two_arches: Path) -> None:
    """The line's ratio is the comparison's own (one session a side, Holm over every point
    of the pair); per CPU scales it and its interval by the CPU counts, exactly."""
    records, _ = load_records(two_arches)
    base, head = arches.sides(records)
    assert (base.arch, head.arch) == ("amd64", "arm64")
    from bench.report.compare import compare, ratio_cell

    rows = compare(base.records, head.records).rows
    assert len(rows) == 8 and all(row.rps.family == 8 for row in rows)
    lead = max(
        (r for r in rows if r.base[0].scenario == "plaintext"),
        key=lambda r: sum(x.rps for x in r.base),
    )
    line = arches.workload_line("light CPU", [lead], (base, head), {})
    assert f"req/s {ratio_cell(lead.rps)}" in line
    half = lead.rps.ratio * 0.5
    assert f"per CPU (2 vs 4) {half:.2f}× [{lead.rps.low * 0.5:.2f}–" in line


def test_price_adds_req_per_dollar_hour(two_arches: Path) -> None:
    """PRICE by arch: req/s per dollar-hour of each side and the ratio scaled by the prices."""
    records, _ = load_records(two_arches)
    lines = arches.summary_lines(records, parse_price("amd64:0.0416,arm64:0.0336"))
    light = next(line for line in lines if line.startswith("- **light CPU**"))
    assert "; per $/h (0.0416 vs 0.0336): " in light
    per = light.split("; per $/h (0.0416 vs 0.0336): ")[1]
    amd, arm = (float(x.replace(",", "")) for x in per.split(" req/s")[0].split(" vs "))
    assert arm / amd > 1.0  # same figures, arm64 cheaper per hour: more req/s per dollar
    only_one = arches.summary_lines(records, parse_price("amd64:0.0416"))
    assert any("per $/h: no price for arm64 (graviton" in line for line in only_one)


@pytest.mark.parametrize(
    "raw", ["amd64", "amd64:", "amd64:x", "amd64:-1", "amd64:0", ":1", "amd64:1,amd64:2", "a b:1"]
)
def test_price_bad_syntax_refused(raw: str) -> None:
    """Every malformed PRICE in one line naming the form and the arches."""
    with pytest.raises(UsageError, match=r"PRICE=.*<arch or MACHINE label>:<dollars per hour>"):
        parse_price(raw)


def test_price_spellings() -> None:
    """x86_64 and aarch64 are amd64 and arm64; a machine label is kept as given."""
    assert parse_price("x86_64:0.04, aarch64:0.03,graviton:0.1") == {
        "amd64": 0.04,
        "arm64": 0.03,
        "graviton": 0.1,
    }


def test_two_machines_of_one_arch(tmp_path: Path) -> None:
    """Two amd64 hosts are compared too (the comparison is between machines)."""
    shutil.copytree(AA / "base", tmp_path / "records")
    relabelled(AA / "head", tmp_path, hostname="vm2", machine_id="7a7a7a7a7a7a")
    lines = arches.summary_lines(load_records(tmp_path)[0])
    assert lines[2].startswith("**amd64 (vm·a5ad [AMD EPYC]) vs amd64 (vm2·7a7a [AMD EPYC])**")
    # both sessions ran on one kernel and Python: nothing else differs that was recorded
    assert "differs: none of these; same: CPUs 2, CPU AMD EPYC" in lines[2]


def test_one_machine_and_emulated_runs_stay_out(tmp_path: Path) -> None:
    """One machine's native runs beside emulated ones: no comparison (emulated runs are a
    functional check); with two machines the emulated runs get one line, in no ratio."""
    shutil.copytree(AA / "base", tmp_path / "records")
    for path in EMULATED.glob("*.json"):
        shutil.copy(path, tmp_path / "records")
    assert arches.summary_lines(load_records(tmp_path)[0]) == []
    relabelled(AA / "head", tmp_path, **GRAVITON)
    lines = arches.summary_lines(load_records(tmp_path)[0])
    assert lines[-2].startswith("Emulated runs (1 record(s), arm64 on amd64) are a functional")
    base, head = arches.sides(load_records(tmp_path)[0])
    assert not any(r.emulated for r in base.records + head.records)


def test_no_common_point_says_what_to_run(tmp_path: Path) -> None:
    """Two machines with no point in common: the line that says how to get one."""
    shutil.copytree(AA / "base", tmp_path / "records")
    relabelled(AA / "head", tmp_path / "b", **GRAVITON)
    for path in (tmp_path / "b" / "records").iterdir():
        data = json.loads(path.read_text())
        data["concurrency"] = 7  # relabelled load: no point of base's
        (tmp_path / "records" / path.name).write_text(json.dumps(data))
        path.unlink()  # only the changed copy is read
    lines = arches.summary_lines(load_records(tmp_path)[0])
    assert any(line.startswith("No point measured on both yet") for line in lines), lines


def test_the_clock_is_recorded_where_the_kernel_says_it() -> None:
    """metadata.cpu_mhz (format 11): this machine's clock as the kernel reports it, or None."""
    from bench.host.metadata import cpu_mhz, host_metadata

    mhz = cpu_mhz()
    assert mhz is None or 100 <= mhz <= 10_000
    assert host_metadata()["cpu_mhz"] == mhz
