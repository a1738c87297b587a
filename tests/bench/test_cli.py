"""Bad input gets one line naming the valid choices and exit status 2, and writes nothing."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench import cli
from bench.core import plan, studyfile
from bench.core.registry import ROOT

BAD = [
    (["--server=nope"], "valid: "),
    (["--scenario=teapot"], "valid: plaintext"),
    (["--concurrency=0"], "out of range 1..10000"),
    (["--concurrency=ten"], "not a whole number"),
    (["--concurrency=5,-3"], "out of range"),
    (["--duration=-1"], "out of range 1..86400"),
    (["--duration=99999"], "out of range"),
    (["--trials=0"], "out of range 1..100"),
    (["--workers=abc"], "not a whole number"),
    (["--arch=sparc"], "valid: aarch64, amd64, arm64, x86_64"),
    (["--results=/proc/nope"], "not a writable directory"),
    (["--proxy=haproxy"], "valid: none, nginx, alb"),
    (["--proxy=alb", "--upstream-keepalive=off"], "an ALB always keeps target connections alive"),
    (["--keepalive=maybe"], "valid: on, off"),
    (["--upstream-keepalive=off"], "needs PROXY=nginx or alb"),
    (["--proxy=nginx", "--proxy-timeout=0"], "out of range 1..600"),
    (["--pin=2"], "valid: on, off"),
    (["--load=ab"], "valid: wrk, locust, oha"),
    (["--load=oha"], "RATE="),
    (["--rate=500"], "LOAD=oha"),
    (["--load=oha", "--rate=0"], "out of range 1..1000000"),
    (["--load=oha", "--rate=abc"], "not a whole number"),
    (["--load=oha", "--rate=500,-1"], "out of range"),
    (["--load=locust", "--scenario=plaintext"], "valid with it: saas"),
    (["--scenario=saas"], "cannot run with LOAD=wrk"),
    (["--locust-workers=2"], "needs LOAD=locust"),
    (["--load=locust", "--locust-workers=65"], "out of range 0..64"),
    (["--target=ftp://10.0.0.5:21"], "is not http://host:port"),
    (["--target=http://10.0.0.5"], "is not http://host:port"),
    (["--target=http://127.0.0.1:8000", "--proxy=nginx"], "PROXY=nginx and TARGET="),
    (["--runtime=foo"], "valid: native, docker"),
    (["--runtime=docker", "--cpus=abc"], "CPUS='abc' is not a number of CPUs in 0.01.."),
    (["--runtime=docker", "--cpus=0"], "CPUS='0' is not a number of CPUs"),
    (["--runtime=docker", "--cpus=4096"], "CPUS='4096' is not a number of CPUs"),
    (["--runtime=docker", "--memory=12q"], "MEMORY='12q' is not a size of at least 6m"),
    (["--runtime=docker", "--memory=1m"], "MEMORY='1m' is not a size of at least 6m"),
    (["--cpus=1"], "needs RUNTIME=docker"),
    (["--memory=512m"], "needs RUNTIME=docker"),
    (["--runtime=docker", "--cpu-quota=0.5"], "RUNTIME=docker and CPU_QUOTA= cannot go together"),
    (["--runtime=docker", "--server=nginx-static"], "nginx-static is not a Python server"),
    (["--network=bogus"], "unknown NETWORK 'bogus'; valid: host, bridge"),
    (["--runtime=docker", "--network=nat"], "unknown NETWORK 'nat'; valid: host, bridge"),
    (["--network=bridge"], "NETWORK=bridge needs RUNTIME=docker"),
    (["--runtime=docker", "--network=bridge", "--proxy=nginx"], "NETWORK=bridge and PROXY="),
]


BAD_CAPACITY = [
    (["--load=wrk"], "LOAD=wrk is closed-loop; valid: LOAD=oha"),
    (["--slo-p99-ms=0"], "SLO_P99_MS=0 is out of range 1..600000"),
    (["--slo-p999-ms=x"], "SLO_P999_MS='x' is not a whole number"),
    (["--budget=5"], "CAPACITY_BUDGET=5 is out of range 10..86400"),
    (["--rate=0"], "RATE=0 is out of range"),
]


@pytest.mark.parametrize(("args", "message"), BAD_CAPACITY)
def test_bad_capacity_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make capacity's own variables and a closed-loop LOAD: exit 2, one line, nothing written."""
    results = tmp_path / "results"
    assert cli.main(["capacity", f"--results={results}", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not results.exists()


def test_capacity_defaults_and_the_start_rate() -> None:
    """make capacity: oha, 5 s steps after 1 s warmups, 3 trials (rounds around the knee, each
    on a fresh server start), p99 <= 100 ms, a search from 50 req/s, or from RATE's first value."""
    parser = cli.build_parser()
    args = parser.parse_args(["capacity"])
    args.rate = "50"
    opts = cli.with_objective(cli.options_from(args), args)
    assert (opts.load_tool, opts.duration_s, opts.warmup_s, opts.trials) == ("oha", 5, 1, 3)
    assert opts.mode.objective is not None and opts.mode.objective.p99_ms == 100
    assert (opts.rates, opts.mode.objective.start_rps, opts.concurrency) == ((50,), 50, ())
    args = parser.parse_args(["capacity", "--rate=300,900", "--slo-p99-ms=20"])
    opts = cli.with_objective(cli.options_from(args), args)
    assert (opts.rates, opts.mode.objective.start_rps, opts.mode.objective.p99_ms) == (
        (300,),
        300,
        20,
    )


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each bad value: exit 2, a single stderr line containing the valid choices or range."""
    results = tmp_path / "results"
    argv = ["run", f"--results={results}", *args]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert message in err
    assert not results.exists(), "nothing written on bad input"


def test_make_bench_with_an_unknown_server_exits_2() -> None:
    """Through make, as a user types it: the one-line error and status 2 reach the shell."""
    result = subprocess.run(
        ["make", "-s", "bench", "SERVER=nope"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 2
    assert "unknown SERVER" in result.stderr and "granian" in result.stderr


def test_trials_auto_and_budget_become_a_precision(tmp_path: Path) -> None:
    """TRIALS=auto BUDGET=5: 3 first rounds and a 300 s budget at the default ±5 % target;
    a number stays a fixed count; auto is refused where rounds mean nothing (capacity)."""
    parser = cli.build_parser()
    args = parser.parse_args(["run", "--trials=auto", "--trials-budget=5", f"--results={tmp_path}"])
    options = cli.options_from(args)
    assert options.trials == 3 and options.precision == plan.Precision(budget_s=300)
    fixed = cli.options_from(parser.parse_args(["run", "--trials=4", f"--results={tmp_path}"]))
    assert fixed.trials == 4 and fixed.precision is None
    assert cli.main(["capacity", "--trials=auto", f"--results={tmp_path}"]) == 2


def test_valid_lists_are_parsed_and_deduplicated() -> None:
    """Comma lists keep their order and drop repeats; 'all' expands to every server."""
    assert cli.validate_int_list("concurrency", "5,10,5, 30") == (5, 10, 30)
    assert cli.validate_choices("server", "all", ["a", "b"], allow_all=True) == ("a", "b")


def test_python_m_bench_without_a_command_exits_2() -> None:
    """No subcommand is bad input too."""
    result = subprocess.run([sys.executable, "-m", "bench"], cwd=ROOT, capture_output=True)
    assert result.returncode == 2


def test_proxy_and_keepalive_options() -> None:
    """KEEPALIVE sets the upstream side too unless UPSTREAM_KEEPALIVE says otherwise; without
    a proxy there is no upstream side; LOAD=locust defaults to the SaaS mix."""
    parse = cli.build_parser().parse_args
    opts = cli.options_from(parse(["run", "--proxy=nginx", "--keepalive=off"]))
    assert (opts.proxy, opts.keepalive, opts.upstream_keepalive) == ("nginx", False, False)
    opts = cli.options_from(parse(["run", "--proxy=nginx", "--upstream-keepalive=off"]))
    assert (opts.keepalive, opts.upstream_keepalive) == (True, False)
    opts = cli.options_from(parse(["run", "--keepalive=off"]))
    assert (opts.proxy, opts.keepalive, opts.upstream_keepalive) == (None, False, None)
    opts = cli.options_from(parse(["run", "--load=locust", "--locust-workers=2"]))
    assert (opts.scenarios, opts.load_tool, opts.load_workers) == (("saas",), "locust", 2)
    assert "saas" not in cli.options_from(parse(["run", "--scenario=all"])).scenarios


def test_alb_front_keeps_upstream_alive() -> None:
    """PROXY=alb: the ALB-like nginx; its upstream side is kept alive even with KEEPALIVE=off
    (a cloud balancer has no switch for it), the client side follows KEEPALIVE."""
    parse = cli.build_parser().parse_args
    opts = cli.options_from(parse(["run", "--proxy=alb", "--keepalive=off"]))
    assert (opts.proxy, opts.keepalive, opts.upstream_keepalive) == ("alb", False, True)


def test_arch_values_and_emulation() -> None:
    """x86_64/aarch64 are normalised; arm64 on an amd64 host is emulated; amd64 on an arm64
    host is refused (not built), naming what is valid."""
    from bench.host import arch

    assert arch.normalize_arch("x86_64") == "amd64" and arch.normalize_arch("AArch64") == "arm64"
    if arch.host_arch() == "amd64":
        arch.check_emulation_supported("arm64")  # no error: emulated
        assert arch.needs_emulation("arm64") and not arch.needs_emulation("amd64")
    else:
        with pytest.raises(arch.ArchError, match="valid here: arm64"):
            arch.check_emulation_supported("amd64")


# -- every error a user can cause: one line naming it, exit 2, nothing written -----------------


def _one_line(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith("bench: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, err
    return err


STUDY = (ROOT / "studies" / "keepalive-timewait.toml").read_text()
BAD_STUDIES = [
    (STUDY.replace("source =", "# source ="), "missing `source`"),
    ("title = 'unterminated\n", "broken.toml"),
    (STUDY.replace('id = "dev-per-request"', 'name = "dev-per-request"'), "needs an id"),
    (STUDY.replace("duration = 10", "duration = 'ten'"), "duration must be a whole number"),
    (STUDY.replace("duration = 10", ""), "has no duration"),
    (STUDY.replace('server = "gunicorn-sync"', 'server = "nope"', 1), "unknown server 'nope'"),
    (STUDY.replace('a = { arm = "sync4-pool"', 'a = { arm = "typo"', 1), "unknown arm 'typo'"),
    (STUDY.replace("[[arm]]", '[[arm]]\nknobs = { workers = "import os" }', 1), "knob workers"),
    (
        STUDY.replace("[run]", 'not_run = [{ label = "gaiohttp" }]\n\n[run]', 1),
        "each `not_run` entry needs the strings label, published, why, instead",
    ),
]
# A study measured in network namespaces (the former load-balancer kind): the same schema.
NS_STUDY = (ROOT / "studies" / "port-exhaustion.toml").read_text()
BAD_STUDIES += [
    (NS_STUDY.replace("namespace = true", ""), "['sysctls'] need namespace = true"),
    (NS_STUDY.replace('proxy = "nginx"', 'proxy = "haproxy"'), "proxy must be one of none"),
    (NS_STUDY.replace('proxy = "nginx"', 'front = "nginx"'), "unknown keys ['front']"),
    (NS_STUDY.replace("rates = [500]\n", "", 1), "give either rates"),
    (NS_STUDY.replace('"net.ipv4.tcp_tw_reuse"', '"kernel.pid_max"', 1), "net.* names only"),
    (re.sub(r"\n\[\[check\]\].*", "\n", NS_STUDY, flags=re.S), "missing `check` (or `expect`"),
    (NS_STUDY.replace("[run]", 'expect = "prose"\n[run]', 1), "or `expect`, not both"),
]


@pytest.mark.parametrize(("text", "message"), BAD_STUDIES)
def test_a_bad_study_file_is_one_line_and_exit_2(
    text: str,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make study NAME=<a malformed file>`: the file and what is wrong in one line, no
    traceback, nothing run."""

    assert STUDY.count("[[arm]]") >= 1 and text != STUDY
    monkeypatch.setattr(studyfile, "STUDIES_DIR", tmp_path / "studies")
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "broken.toml").write_text(text)
    results = tmp_path / "results"
    assert cli.main(["study", "--name=broken", f"--results={results}"]) == 2
    _one_line(capsys, "broken.toml", message)
    assert not results.exists()


GRANIAN = (ROOT / "servers" / "granian" / "server.toml").read_text()
BAD_DECLARATIONS = [
    ("argv = [", "not valid TOML"),
    ("description = 'x'\napp = 'wsgi'\n", "missing required key 'argv'"),
    (GRANIAN.split("[knobs.workers]")[0].replace("[env]", "knobs = 3\n[env]"), "knobs must be"),
    (GRANIAN.replace('app = "wsgi"', "app = ['wsgi']"), "app must be a string"),
    (re.sub(r'why = "one process per CPU[^\n]*\n', "", GRANIAN), "[knobs.workers] default"),
]


@pytest.mark.parametrize(("text", "message"), BAD_DECLARATIONS)
@pytest.mark.parametrize("command", ["run", "study"])
def test_a_bad_server_declaration_is_one_line_and_exit_2(
    text: str,
    message: str,
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A malformed servers/<id>/server.toml (here in a copy of the folder) refuses every run,
    naming the file and the field."""
    from bench.core import registry

    servers = tmp_path / "servers"
    shutil.copytree(registry.SERVERS_DIR / "granian", servers / "granian")
    assert text != GRANIAN
    (servers / "granian" / "server.toml").write_text(text)
    monkeypatch.setattr(registry, "SERVERS_DIR", servers)
    results = tmp_path / "results"
    argv = ["run", "--server=granian"] if command == "run" else ["study", "--name=accept-queue"]
    assert cli.main([*argv, f"--results={results}"]) == 2
    _one_line(capsys, "granian/server.toml", message)
    assert not results.exists()


@pytest.mark.parametrize("command", [["run"], ["report"], ["study", "--name=accept-queue"]])
@pytest.mark.parametrize("where", ["file", "below-a-file"])
def test_results_that_is_not_a_directory_is_one_line_and_exit_2(
    command: list[str], where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """RESULTS naming a file (or a path through one): every command refuses it in one line.
    (Tests run as root, which reads any directory: a file stands for the unreadable case.)"""
    afile = tmp_path / "afile"
    afile.write_text("not a directory")
    results = afile if where == "file" else afile / "results"
    assert cli.main([*command, f"--results={results}"]) == 2
    _one_line(capsys, f"RESULTS={str(results)!r}", "not a writable directory")
    assert afile.read_text() == "not a directory"


def test_a_summary_that_cannot_be_written_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make report` where summary.md is a directory: one line naming it, no temp file left."""
    (tmp_path / "summary.md").mkdir()
    (tmp_path / "records").mkdir()
    shutil.copy(next(MACHINE_A.glob("*.json")), tmp_path / "records")
    assert cli.main(["report", f"--results={tmp_path}"]) == 2
    _one_line(capsys, f"{tmp_path / 'summary.md'}: Is a directory")
    assert (tmp_path / "summary.md").is_dir() and not list(tmp_path.rglob(".tmp-*"))


MACHINE_A = ROOT / "tests" / "fixtures" / "records" / "machine-a"
REFERENCE_LINE = "the shipped reference run is results/reference/summary.md"


@pytest.mark.parametrize("where", ["fresh-clone", "empty", "missing"])
def test_report_with_nothing_measured_says_so_and_where_the_reference_is(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """make report on a fresh clone (only results/reference/), an empty or a missing RESULTS:
    one line, exit 2, the user's summary.md and index.html untouched, nothing created."""
    results = tmp_path / "results"
    if where != "missing":
        results.mkdir()
        (results / "summary.md").write_text("the user's summary\n")
        (results / "index.html").write_text("<p>the user's page</p>\n")
    if where == "fresh-clone":
        (results / "reference" / "records").mkdir(parents=True)
        shutil.copy(next(MACHINE_A.glob("*.json")), results / "reference" / "records")
    before = sorted(tmp_path.rglob("*"))
    assert cli.main(["report", f"--results={results}"]) == 2
    _one_line(capsys, f"nothing measured yet: RESULTS={str(results)!r} holds no records")
    assert sorted(tmp_path.rglob("*")) == before
    if where != "missing":
        assert (results / "summary.md").read_text() == "the user's summary\n"
        assert (results / "index.html").read_text() == "<p>the user's page</p>\n"


def test_report_on_a_fresh_clone_with_reference_1_reports_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """REFERENCE=1 counts the shipped reference: the summary is written from it, exit 0."""
    (tmp_path / "reference" / "records").mkdir(parents=True)
    shutil.copy(next(MACHINE_A.glob("*.json")), tmp_path / "reference" / "records")
    monkeypatch.setenv("PYWEBBENCH_REFERENCE", "1")
    assert cli.main(["report", f"--results={tmp_path}"]) == 0
    assert (tmp_path / "summary.md").read_text().startswith("# Benchmark summary")


def test_report_on_a_directory_it_cannot_read_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A RESULTS this user cannot list (root lists any: the permission check is faked) is not
    called empty: one line saying it is unreadable, exit 2."""
    (tmp_path / "records").mkdir()
    shutil.copy(next(MACHINE_A.glob("*.json")), tmp_path / "records")
    real = os.access
    # only reading is denied: a directory it may write but not list
    monkeypatch.setattr(
        os, "access", lambda p, mode: not (Path(p) == tmp_path and mode & os.R_OK) and real(p, mode)
    )
    assert cli.main(["report", f"--results={tmp_path}"]) == 2
    _one_line(capsys, f"RESULTS={str(tmp_path)!r} is not readable by this user")
    assert not (tmp_path / "summary.md").exists()


@pytest.mark.parametrize("command", ["report", "export", "compare"])
def test_unreadable_records_only_are_one_line_and_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every record file unreadable (corrupt JSON, not a record): report, export and compare
    say so in one line with how many and the first one's problem, exit 2, write nothing."""
    bad = tmp_path / "bad"
    (bad / "records").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "records" / "corrupt.json", bad / "records")
    (bad / "records" / "list.json").write_text("[]")
    argv = {
        "report": ["report", f"--results={bad}"],
        "export": ["export", f"--results={bad}", "--format=csv"],
        "compare": ["compare", f"--base={bad}", f"--head={MACHINE_A}"],
    }[command]
    assert cli.main(argv) == 2
    name = "BASE" if command == "compare" else "RESULTS"
    _one_line(capsys, f"{name}={str(bad)!r} holds no readable record: 2 file(s) skipped")
    assert sorted(p.name for p in bad.rglob("*")) == ["corrupt.json", "list.json", "records"]


def test_python_m_bench_study_with_a_bad_file_prints_no_traceback(tmp_path: Path) -> None:
    """As a user runs it, in a process of its own: status 2 and one line on stderr."""
    (tmp_path / "broken.toml").write_text(STUDY.replace("source =", "# source ="))
    code = (
        "import sys, pathlib; from bench import cli; from bench.core import studyfile; "
        f"studyfile.STUDIES_DIR = pathlib.Path({str(tmp_path)!r}); "
        f"sys.exit(cli.main(['study', '--name=broken', '--results={tmp_path / 'r'}']))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "missing `source`" in result.stderr


def test_docker_runtime_without_an_image_names_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """RUNTIME=docker for a server whose image was never built: one line naming
    `make images SERVER=<id>`, exit 2, before anything starts (the engine is asked nothing
    else: its image store is replaced by an empty one)."""
    from bench.host import docker, images

    monkeypatch.setattr(docker, "engine_problem", lambda: None)
    monkeypatch.setattr(images, "image_inspect", lambda ref: None)
    results = tmp_path / "results"
    argv = ["run", f"--results={results}", "--runtime=docker", "--server=granian,uvicorn"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["bench: RUNTIME=docker: no image of granian; run `make images SERVER=granian`"]
    assert not results.exists()


def test_docker_runtime_with_a_stale_image_names_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image built from other inputs (its label differs from the checkout's hash): one
    line saying it is out of date, exit 2."""
    from bench.host import docker, images

    monkeypatch.setattr(docker, "engine_problem", lambda: None)
    stale = {"Id": "sha256:00", "Config": {"Labels": {images.INPUTS_LABEL: "other"}}}
    monkeypatch.setattr(images, "image_inspect", lambda ref: stale)
    assert cli.main(["run", f"--results={tmp_path}/r", "--runtime=docker"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "out of date" in err[0] and "make images SERVER=granian" in err[0]


def test_docker_runtime_limits_reach_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """CPUS and MEMORY in docker's syntax become the options' limits (bytes for memory)."""
    from bench.host import docker, images

    monkeypatch.setattr(docker, "engine_problem", lambda: None)
    monkeypatch.setattr(images, "image_for", lambda spec, arch: None)
    args = cli.build_parser().parse_args(["run", "--runtime=docker", "--cpus=0.5", "--memory=512m"])
    opts = cli.options_from(args)
    assert (opts.mode.runtime, opts.cpus, opts.memory_bytes) == ("docker", 0.5, 512 * 2**20)
    assert opts.network == "host"
    bridge = cli.build_parser().parse_args(["run", "--runtime=docker", "--network=bridge"])
    assert cli.options_from(bridge).network == "bridge"


def test_make_images_refuses_an_emulated_arch_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """make images ARCH=<the other arch>: one line saying it is not built, exit 2."""
    from bench.host.arch import host_arch

    other = "arm64" if host_arch() == "amd64" else "amd64"
    assert cli.main(["images", f"--arch={other}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"ARCH={other} images are not built" in err[0], err
