"""make remote's local parts (bench.harness.remote, bench.host.ssh): the ssh argv, the files
brought back into RESULTS without overwriting any, the exit status. The whole path over a real
ssh server is tests/integration/test_remote.py."""

from pathlib import Path

from bench.harness import remote
from bench.host import ssh

RECORD = next((Path(__file__).parent.parent / "fixtures" / "aa" / "base").glob("*.json"))


def test_ssh_never_prompts(monkeypatch) -> None:
    """BatchMode and a connect timeout always; the test's ssh_config through -F; a terminal
    only where asked; the command quoted for the shell there."""
    monkeypatch.setenv(ssh.CONFIG_ENV, "/tmp/cfg")
    argv = ssh.ssh_argv("u@h", ["make", "bench", "SERVER=a b"], tty=True)
    assert argv[1:3] == ["-F", "/tmp/cfg"] and "BatchMode=yes" in argv and "-tt" in argv
    assert argv[-2:] == ["u@h", "make bench 'SERVER=a b'"]
    monkeypatch.delenv(ssh.CONFIG_ENV)
    assert "-T" in ssh.ssh_argv("h", ["true"]) and "-F" not in ssh.ssh_argv("h", ["true"])


def _back(tmp_path: Path) -> Path:
    back = tmp_path / "back"
    (back / "records").mkdir(parents=True)
    (back / "raw").mkdir()
    (back / "records" / RECORD.name).write_bytes(RECORD.read_bytes())
    (back / "raw" / "x.wrk.txt").write_text("raw output")
    return back


def test_files_come_back_once_and_never_over_another(tmp_path: Path) -> None:
    """Each file lands under its name; the same bytes already there: left as they are; other
    bytes there: kept, named as a problem; no temp file left in RESULTS."""
    results = tmp_path / "results"
    said: list[str] = []
    assert remote.bring_back(_back(tmp_path), results, said.append) == (2, [])
    assert (results / "records" / RECORD.name).read_bytes() == RECORD.read_bytes()
    assert remote.bring_back(_back(tmp_path / "again"), results, said.append) == (0, [])
    (results / "raw" / "x.wrk.txt").write_text("another run's")
    brought, problems = remote.bring_back(_back(tmp_path / "third"), results, said.append)
    assert brought == 0 and len(problems) == 1 and "kept, not replaced" in problems[0]
    assert (results / "raw" / "x.wrk.txt").read_text() == "another run's"
    assert sorted(p.name for p in results.rglob("*")) == sorted(
        ["records", "raw", RECORD.name, "x.wrk.txt"]
    )


def test_exit_status() -> None:
    """0 when make bench there succeeded and every file came back; 130 interrupted; 1 else."""
    said: list[str] = []
    assert remote._status(0, [], "h", said.append) == 0
    assert remote._status(0, ["a file kept"], "h", said.append) == 1
    assert remote._status(2, [], "h", said.append) == 1
    assert remote._status(130, [], "h", said.append) == 130


def test_the_run_directory_is_removed_only_after_its_session_ends(tmp_path: Path) -> None:
    """A harness there that, hung up, still writes into the run directory: the removal waits
    for its session to end, so nothing is re-made behind it (CI saw the directory left)."""
    import subprocess
    import time

    run_dir = tmp_path / "pywebbench-remote.x"
    run_dir.mkdir()
    late = 'sleep 2; mkdir -p "$0/results/records"; echo {} > "$0/results/records/late.json"'
    writer = subprocess.Popen(
        remote.in_session(str(run_dir), ["sh", "-c", late, str(run_dir)]),
        start_new_session=True,  # what sshd does for the command it runs
    )
    deadline = time.monotonic() + 30
    while not (run_dir / "session").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (run_dir / "session").read_text().strip() == str(writer.pid)
    subprocess.run(remote.remove_after_session(str(run_dir), wait_s=60), check=True)
    assert writer.poll() == 0 and not run_dir.exists()


def test_a_zombie_of_the_session_does_not_hold_the_removal(tmp_path: Path) -> None:
    """The session's last process has exited and its parent has not reaped it yet: it writes
    nothing more, so the removal does not wait for it (it waited the whole wait_s; the test
    above took a minute for it)."""
    import subprocess
    import time

    run_dir = tmp_path / "pywebbench-remote.z"
    run_dir.mkdir()
    writer = subprocess.Popen(remote.in_session(str(run_dir), ["true"]), start_new_session=True)
    deadline = time.monotonic() + 30
    while not (run_dir / "session").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    while time.monotonic() < deadline:  # exited, not reaped: a zombie of the session
        state = subprocess.run(["ps", "-o", "stat=", "-p", str(writer.pid)], capture_output=True)
        if state.stdout.strip().startswith(b"Z"):
            break
        time.sleep(0.05)
    subprocess.run(remote.remove_after_session(str(run_dir), wait_s=600), check=True, timeout=60)
    assert not run_dir.exists()
    assert writer.wait() == 0


def test_without_a_session_file_the_run_directory_is_removed_at_once(tmp_path: Path) -> None:
    import subprocess

    run_dir = tmp_path / "pywebbench-remote.y"
    (run_dir / "src").mkdir(parents=True)
    subprocess.run(remote.remove_after_session(str(run_dir), wait_s=600), check=True, timeout=60)
    assert not run_dir.exists()


def test_an_ipv6_host_reaches_ssh_without_brackets() -> None:
    """Issue 58 item 7: HOST=[::1] and user@[::1] are taken and ssh gets ::1 (it would look
    the bracketed text up as a name); names and IPv4 addresses pass as they are."""
    from bench.core.variables import parse_host

    for given, meant in (("[::1]", "::1"), ("u@[fe80::1]", "u@fe80::1"), ("::1", "::1")):
        assert ssh.ssh_argv(parse_host(given), ["true"])[-2] == meant
    assert ssh.ssh_argv(parse_host("a@10.0.0.7"), ["true"])[-2] == "a@10.0.0.7"
