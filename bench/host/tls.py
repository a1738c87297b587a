"""The TLS certificate of a run (PROTOCOL=https1 or h2): made by the harness, removed after.

Input: a run directory. Output: a Certificate (the server's certificate for 127.0.0.1 and its
private key, and the one-run authority that signed it, in <run_dir>/tls/), made with the
openssl command line; TlsError when openssl fails. The authority is the clients' trust anchor:
verification and the load tool check the server against it, so nothing runs with
verification off.
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
    """The server's certificate and key (PKCS#8, as Granian requires) and the authority that
    signed it (what clients trust), under a run directory."""

    cert: Path
    key: Path
    ca: Path

    @property
    def folder(self) -> Path:
        """The folder holding them (removed as one)."""
        return self.cert.parent


def paths(run_dir: Path) -> Certificate:
    """Where a run's certificate, key and authority are (whether made yet or not)."""
    folder = run_dir / "tls"
    return Certificate(folder / "cert.pem", folder / "key.pem", folder / "ca.pem")


# The server's certificate is a leaf (CA:FALSE) signed by a one-run authority: rustls (oha)
# refuses a self-signed certificate that is both the authority and the server's
# ("CaUsedAsEndEntity"), as a browser would.
LEAF_EXTENSIONS = (
    f"subjectAltName=IP:{HOST}\n"
    "basicConstraints=critical,CA:FALSE\n"
    "keyUsage=critical,digitalSignature\n"
    "extendedKeyUsage=serverAuth\n"
)


def make(run_dir: Path) -> Certificate:
    """A new authority and a certificate it signs for 127.0.0.1 (an IP subjectAltName, as
    clients verify an address), the server's key unencrypted and the owner's only; the
    authority's key is deleted once it has signed. TlsError on failure."""
    made = paths(run_dir)
    made.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca_key, csr, ext = (made.folder / n for n in ("ca.key", "cert.csr", "leaf.ext"))
    ext.write_text(LEAF_EXTENSIONS)
    days = ("-days", "1")
    _openssl("req", "-x509", *KEY_ARGS, "-nodes", *days, "-subj", "/CN=pywebbench run CA",
             "-keyout", str(ca_key), "-out", str(made.ca))  # fmt: skip
    _openssl("req", "-new", *KEY_ARGS, "-nodes", "-subj", f"/CN={HOST}",
             "-keyout", str(made.key), "-out", str(csr))  # fmt: skip
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(made.ca), "-CAkey", str(ca_key),
             "-set_serial", "1", *days, "-extfile", str(ext), "-out", str(made.cert))  # fmt: skip
    for leftover in (ca_key, csr, ext):
        leftover.unlink(missing_ok=True)
    made.key.chmod(0o600)
    return made


def _openssl(*args: str) -> None:
    """One openssl command; TlsError with its last line when it fails."""
    argv = [shutil.which("openssl") or "/usr/bin/openssl", *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TlsError(f"openssl did not run: {exc}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise TlsError(f"openssl {args[0]} could not make the run's certificate: {tail[0]}")


def remove(run_dir: Path) -> None:
    """The run's certificate and key, gone (nothing when none was made)."""
    shutil.rmtree(paths(run_dir).folder, ignore_errors=True)
