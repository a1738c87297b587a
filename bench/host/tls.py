"""The TLS certificate of a run (PROTOCOL=https1 or h2): made by the harness, removed after.

Input: a run directory. Output: a Certificate (a self-signed certificate for 127.0.0.1 and its
private key, in <run_dir>/tls/), made with the openssl command line; TlsError when openssl
fails. The certificate is both the server's and the clients' trust anchor: verification and
the load tool check the server against it, so nothing runs with verification off.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# ECDSA P-256: the key type ACME clients issue by default (certbot since 2.0), so the
# handshake costs what a production certificate's does. One day: it lives for one run.
KEY_ARGS = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")
HOST = "127.0.0.1"


class TlsError(RuntimeError):
    """The certificate could not be made."""


@dataclass(frozen=True)
class Certificate:
    """A certificate and its key (PKCS#8, as Granian requires) under a run directory."""

    cert: Path
    key: Path

    @property
    def folder(self) -> Path:
        """The folder holding both (removed as one)."""
        return self.cert.parent


def paths(run_dir: Path) -> Certificate:
    """Where a run's certificate and key are (whether made yet or not)."""
    folder = run_dir / "tls"
    return Certificate(folder / "cert.pem", folder / "key.pem")


def make(run_dir: Path) -> Certificate:
    """A new self-signed certificate for 127.0.0.1 (IP subjectAltName, as clients verify an
    address by) and its unencrypted key, readable by the owner only; TlsError on failure."""
    made = paths(run_dir)
    made.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    openssl = shutil.which("openssl") or "/usr/bin/openssl"
    argv = [
        openssl, "req", "-x509", *KEY_ARGS, "-nodes", "-days", "1",
        "-subj", f"/CN={HOST}", "-addext", f"subjectAltName=IP:{HOST}",
        "-keyout", str(made.key), "-out", str(made.cert),
    ]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TlsError(f"openssl did not run: {exc}") from exc
    if done.returncode != 0 or not made.cert.is_file() or not made.key.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TlsError(f"openssl could not make a certificate: {tail[0]}")
    made.key.chmod(0o600)
    return made


def remove(run_dir: Path) -> None:
    """The run's certificate and key, gone (nothing when none was made)."""
    shutil.rmtree(paths(run_dir).folder, ignore_errors=True)
