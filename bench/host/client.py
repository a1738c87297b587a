"""One request over a PROTOCOL=: the client every readiness check and verification uses.

Input: a Protocol (bench.core.protocol), the certificate a TLS server must present, a host,
port and path. Output: a Response (status, lower-cased headers, body, elapsed time), or
OSError when no answer came, or when it came over another HTTP version than the protocol's
(a server that falls back to HTTP/1.1 has not been verified for HTTP/2). HTTP/1.1 goes through
the standard library (TLS verified against the run's certificate); HTTP/2 through curl (built
with nghttp2 on Debian), which says which version answered.
"""

from __future__ import annotations

import http.client
import shutil
import ssl
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.protocol import HTTP1, PROTOCOLS, Protocol
from bench.core.scenario import Response


@dataclass(frozen=True)
class Client:
    """How to ask a server: over which protocol, trusting which certificate."""

    protocol: Protocol = field(default_factory=lambda: PROTOCOLS[HTTP1])
    cafile: Path | None = None  # the run's certificate (bench.host.tls); None: clear text

    def url(self, host: str, port: int, path: str = "") -> str:
        """scheme://host:port/path."""
        return f"{self.protocol.scheme}://{host}:{port}{path}"

    def get(
        self, host: str, port: int, path: str, timeout_s: float = 10.0, method: str = "GET"
    ) -> Response:
        """`method` of path on a fresh connection (an empty body for methods that carry one)."""
        if self.protocol.http2:
            return self._curl(host, port, path, timeout_s, method)
        return self._stdlib(host, port, path, timeout_s, method)

    def _stdlib(self, host: str, port: int, path: str, timeout_s: float, method: str) -> Response:
        if self.protocol.tls:
            context = ssl.create_default_context(cafile=self.cafile)
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=timeout_s, context=context
            )
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
        start = time.monotonic()
        try:
            body = b"" if method not in ("GET", "HEAD", "DELETE") else None
            conn.request(method, path, body=body)
            resp = conn.getresponse()
            data = resp.read()
            headers: dict[str, str] = {}
            for key, value in resp.getheaders():
                headers.setdefault(key.lower(), value)
            return Response(resp.status, headers, data, time.monotonic() - start)
        finally:
            conn.close()

    def _curl(self, host: str, port: int, path: str, timeout_s: float, method: str) -> Response:
        with tempfile.TemporaryDirectory(prefix="pywebbench-h2-") as folder:
            body_path, head_path = Path(folder) / "body", Path(folder) / "head"
            argv = [
                shutil.which("curl") or "/usr/bin/curl", "-sS", "--max-time", f"{timeout_s:g}",
                *(["--head"] if method == "HEAD" else ["-X", method]),
                "-o", str(body_path), "-D", str(head_path),
                "-w", "%{http_version}",
            ]  # fmt: skip
            if method not in ("GET", "HEAD", "DELETE"):
                argv += ["--data-binary", ""]
            if self.protocol.tls:
                argv += ["--http2", "--cacert", str(self.cafile)]
            else:
                argv.append("--http2-prior-knowledge")
            start = time.monotonic()
            try:
                done = subprocess.run(
                    [*argv, self.url(host, port, path)],
                    capture_output=True,
                    text=True,
                    timeout=timeout_s + 5,
                )
            except subprocess.TimeoutExpired as exc:
                raise OSError(f"curl did not answer within {timeout_s:g} s") from exc
            elapsed = time.monotonic() - start
            if done.returncode != 0:
                raise OSError(f"curl exited with {done.returncode}: {done.stderr.strip()}")
            if done.stdout.strip() != self.protocol.version:
                raise OSError(
                    f"answered over HTTP/{done.stdout.strip()}, not HTTP/{self.protocol.version}"
                )
            status, headers = parse_head(head_path.read_text(errors="replace"))
            # curl makes no output file for an empty body
            body = body_path.read_bytes() if body_path.exists() else b""
            return Response(status, headers, body, elapsed, "2")


def parse_head(text: str) -> tuple[int, dict[str, str]]:
    """The status and lower-cased headers of curl's -D file (its last block: an interim
    100 Continue comes first); OSError when it holds no status line."""
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    if not blocks:
        raise OSError("curl wrote no response head")
    lines = blocks[-1].strip().split("\n")
    parts = lines[0].split()
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise OSError(f"not a status line: {lines[0]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.setdefault(name.strip().lower(), value.strip())
    return int(parts[1]), headers


PLAIN = Client()
