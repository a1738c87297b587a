#!/usr/bin/env bash
# Bootstrap: distro packages, uv, and the harness's own venv. Idempotent, fast when done.
# Input: nothing (run from the checkout root). Output: .bench/venv ready to run `python -m bench`.
# The per-server venvs are made later by the harness itself (bench/venv.py), from servers/<id>/.
# PYWEBBENCH_SETUP_DRY_RUN=1: print what is missing and the apt command, change nothing more.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
# Ctrl-C (or a TERM) stops set-up here, whatever child it reached: a child that handles
# SIGINT itself and exits 1 would otherwise let the script go on to apt-get install.
made_policy=0
sudo=()
interrupted() {
  [ "$made_policy" -eq 0 ] || "${sudo[@]}" rm -f /usr/sbin/policy-rc.d
  echo "setup: interrupted; nothing more is installed" >&2
  exit 130
}
trap interrupted INT TERM
bash "$root/bench/require-python.sh" || exit 2
# uv reads uv.toml / pyproject.toml from every parent directory: a stray one above the
# checkout (seen: /tmp/uv.toml above a clone in /tmp) must not change how venvs are made.
export UV_NO_CONFIG=1
state="$root/.bench"
mkdir -p "$state"

# Binaries the stack needs, and the Debian package that provides each.
declare -A need=(
  [pgbouncer]=pgbouncer
  [nginx]=nginx
  [wrk]=wrk
  [psql]=postgresql-client
  [curl]=curl
  [ss]=iproute2
  # PROTOCOL=https1/h2: the run's certificate is made with openssl (bench/host/tls.py); HTTP/2
  # is verified with curl, which Debian builds with nghttp2.
  [openssl]=openssl
)
missing=()
for bin in "${!need[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || [ -x "/usr/sbin/$bin" ] || missing+=("${need[$bin]}")
done
# Meinheld (and any server without a wheel for this Python) builds from source.
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
python3 -c 'import os, sysconfig; raise SystemExit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null \
  || missing+=(python3-dev)
# initdb/postgres live under /usr/lib/postgresql/<major>/bin, not on PATH.
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || missing+=(postgresql)
# ARCH=arm64 on an amd64 host runs the server under qemu user-mode emulation (bench/arch.py);
# `make test` checks that path too, and validates compose/ with docker-compose
# (PYWEBBENCH_TEST=1).
arch_wanted=${ARCH:-}
if [ "${PYWEBBENCH_TEST:-0}" = 1 ]; then
  command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
fi
# tests/bench/test_html.py opens RESULTS/index.html in a real browser (headless); make reference
# takes docs/report.png with it (bench/report/picture.py; PYWEBBENCH_PICTURE=1 from the Makefile).
if [ "${PYWEBBENCH_TEST:-0}" = 1 ] || [ "${PYWEBBENCH_PICTURE:-0}" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
fi
# make images (IMAGES=1) and the test suite build the base image from Debian's packages with
# debootstrap (bench/host/images.py).
if [ "${IMAGES:-0}" = 1 ] || [ "${PYWEBBENCH_TEST:-0}" = 1 ]; then
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
fi
if [ "$(uname -m)" = x86_64 ] && { [ "$arch_wanted" = arm64 ] || [ "$arch_wanted" = aarch64 ] \
    || [ "${PYWEBBENCH_TEST:-0}" = 1 ]; }; then
  [ -x /usr/bin/qemu-aarch64-static ] || missing+=(qemu-user-static)
  command -v update-binfmts >/dev/null 2>&1 || missing+=(binfmt-support)
  command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
fi
# oha (open-loop load at a fixed arrival rate) is built with cargo from crates.io at a pinned
# version, and only when asked for: LOAD=oha, OHA=1 (capacity searches), or the test suite.
# oha 1.16.0 declares rust-version 1.88: Debian 12's `cargo` (1.65) is too old, `cargo-web`
# (bookworm-security) brings 1.96.
oha_version=1.16.0
oha_rust=1.88
oha_stamp="$state/tools/.oha-version"
oha_build=0
if [ "${LOAD:-}" = oha ] || [ "${OHA:-0}" = 1 ] || [ "${PYWEBBENCH_TEST:-0}" = 1 ]; then
  if [ ! -x "$state/tools/bin/oha" ] || [ "$(cat "$oha_stamp" 2>/dev/null)" != "$oha_version" ]; then
    oha_build=1
    if ! command -v cargo >/dev/null 2>&1; then
      if apt-cache show cargo-web >/dev/null 2>&1; then missing+=(cargo-web); else missing+=(cargo); fi
    fi
  fi
fi
# uv is bootstrapped from a venv when absent: that needs ensurepip (python3-venv on Debian).
if ! command -v uv >/dev/null 2>&1 && [ ! -x "$state/tools/bin/uv" ]; then
  python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
fi
# PYTHON=<name> (issue 33): CPython built here from its pinned tarball (bench/python-build.sh)
# needs make and the headers of the modules the servers import (ssl, zlib, ctypes for pure
# psycopg's libpq, bz2, lzma, sqlite3).
if [ -n "${PYTHON:-}" ]; then
  command -v make >/dev/null 2>&1 || missing+=(make)
  for pkg in libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
fi

# apt waits for a lock another apt holds (unattended-upgrades, or a second make setup in another
# clone, seen here: "Could not get lock /var/lib/dpkg/lock-frontend", exit 100) instead of
# failing at once; apt >= 1.9.11 reads DPkg::Lock::Timeout (seconds) for update and install.
apt=(apt-get -o DPkg::Lock::Timeout=600)
if [ "${PYWEBBENCH_SETUP_DRY_RUN:-0}" = 1 ]; then
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: dry run: would run ${apt[*]} update, then ${apt[*]} install -y --no-install-recommends ${missing[*]}" >&2
  else
    echo "setup: dry run: no distro package missing" >&2
  fi
  exit 0
fi
if [ ${#missing[@]} -gt 0 ]; then
  cmd=("${apt[@]}" install -y --no-install-recommends "${missing[@]}")
  if [ "$(id -u)" -eq 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo); else
    echo "setup: missing packages; run: sudo apt-get update && sudo ${cmd[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]} with apt" >&2
  # Never let a package start a system-wide service (a default postgres on 5432, nginx on 80):
  # the harness runs its own private instances on free loopback ports.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${sudo[@]}" chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" "${apt[@]}" update -qq
  "${sudo[@]}" "${cmd[@]}" -qq
  [ "$made_policy" -eq 0 ] || "${sudo[@]}" rm -f /usr/sbin/policy-rc.d
fi

# uv: the one installer for every Python environment of the project (pinned).
uv_version=0.13.9
if command -v uv >/dev/null 2>&1; then
  uv=$(command -v uv)
else
  uv="$state/tools/bin/uv"
  if [ ! -x "$uv" ]; then
    echo "setup: installing uv $uv_version into .bench/tools" >&2
    python3 -m venv "$state/tools"
    "$state/tools/bin/pip" install -q "uv==$uv_version"
  fi
fi
echo "$uv" >"$state/uv-path"

# The harness venv, re-created only when its requirements change.
req="$root/bench/requirements.txt"
stamp="$state/venv/.requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: creating the harness venv .bench/venv" >&2
  export UV_PYTHON_DOWNLOADS=never
  rm -rf "$state/venv"
  "$uv" venv -q --python python3 "$state/venv"
  "$uv" pip install -q --python "$state/venv/bin/python" -r "$req"
  echo "$want" >"$stamp"
fi

# oha into .bench/tools/bin/oha, rebuilt only when the pin changes (the stamp holds the version).
if [ "$oha_build" = 1 ]; then
  rustup_cmd="curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y && . \"\$HOME/.cargo/env\""
  if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: oha $oha_version needs cargo >= $oha_rust; run: $rustup_cmd  (then this again)" >&2
    exit 1
  fi
  have=$(cargo --version | awk '{print $2}')
  if [ "$(printf '%s\n%s\n' "$oha_rust" "$have" | sort -V | head -n1)" != "$oha_rust" ]; then
    echo "setup: oha $oha_version needs cargo >= $oha_rust, $(command -v cargo) is $have; run: $rustup_cmd  (then this again)" >&2
    exit 1
  fi
  echo "setup: building oha $oha_version into .bench/tools with cargo $have (5 to 9 minutes on 2 CPUs)" >&2
  rm -f "$oha_stamp"
  cargo install -q --locked --force --root "$state/tools" oha --version "$oha_version"
  echo "$oha_version" >"$oha_stamp"
fi

# PYTHON=<name>: the interpreter every server's venv is made from, built once (minutes; a
# second run finds its stamp and does nothing).
if [ -n "${PYTHON:-}" ]; then
  bash "$root/bench/python-build.sh" "$PYTHON" || exit 1
fi
