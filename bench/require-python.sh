#!/usr/bin/env bash
# The system python3 runs the pre-check (bench/precheck.py reads TOML with tomllib) and makes
# the harness venv: it must be 3.11 or newer. Checked from its --version, before anything.
# Input: PATH. Output: nothing and status 0, or one line on stderr and status 2.
need=3.11
how="on Debian 12 / Ubuntu 24.04 it is the system python3 (apt-get install python3);"
how+=" on Ubuntu 22.04: apt-get install python3.11 python3.11-venv python3.11-dev,"
how+=" then put a python3 -> python3.11 link first on PATH"
if ! command -v python3 >/dev/null 2>&1; then
  echo "bench: python3 >= $need is needed and there is no python3 on PATH; $how" >&2
  exit 2
fi
have=$(python3 --version 2>&1 | sed -n 's/^Python \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p')
if [ -z "$have" ] || [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
  echo "bench: python3 >= $need is needed, $(command -v python3) is ${have:-of unknown version}; $how" >&2
  exit 2
fi
