"""The ALB-like front (PROXY=alb): its config renders, nginx accepts it, and it says what a
cloud balancer does (keep-alive to the target with a 60 s idle timeout, no retry)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from bench.stack.components import render_proxy


def _upstream_block(site: str) -> str:
    return re.search(r"upstream app \{(.*?)\}", site, re.S).group(1)


def test_alb_config_is_accepted_by_nginx(tmp_path: Path) -> None:
    """`nginx -t` accepts the rendered ALB config; the upstream block keeps connections 60 s,
    requests are HTTP/1.1 with the Connection header cleared, and nothing is retried."""
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        pytest.skip("nginx is not installed")
    main, _ = render_proxy(tmp_path, "alb", "127.0.0.1:18081", "127.0.0.1:18082", True, 60, "alb")
    site = (tmp_path / "alb-site.conf").read_text()
    upstream = _upstream_block(site)
    assert re.search(r"^\s*keepalive_timeout 60s;", upstream, re.M)
    assert re.search(r"^\s*keepalive \d+;", upstream, re.M)
    assert re.search(r"^\s*proxy_next_upstream off;", site, re.M)
    assert re.search(r"^\s*proxy_http_version 1\.1;", site, re.M)
    assert 'proxy_set_header Connection "";' in site
    for text in (site, main.read_text()):  # every placeholder filled (comments aside)
        assert not [line for line in text.splitlines() if "${" in line.split("#")[0]]
    result = subprocess.run(
        [nginx, "-t", "-c", str(main), "-e", "stderr"], capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


def test_plain_nginx_upstream_close_when_keepalive_off(tmp_path: Path) -> None:
    """PROXY=nginx with upstream keep-alive off sends `Connection: close` (one upstream
    connection per request: the port-exhaustion study's arm)."""
    render_proxy(tmp_path, "ng", "127.0.0.1:1", "127.0.0.1:2", False, 60, "nginx")
    assert 'proxy_set_header Connection "close";' in (tmp_path / "ng-site.conf").read_text()
