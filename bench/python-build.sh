#!/usr/bin/env bash
# Build one pinned CPython for PYTHON=<spec> (issue 33): "3.14t" is free-threaded
# (--disable-gil), "3.14" the same version with the GIL. The tarball's URL and sha256 come from
# bench/python-builds.toml; the sha256 is checked before anything is unpacked.
# Input: the spec (argument). Output: .bench/tools/python/<spec>/bin/python3, with a stamp
# (.build) naming version, sha256 and flags; a second run with the same stamp does nothing.
# No PGO/LTO: a build takes minutes instead of most of an hour (the measured comparison is the
# GIL against no GIL on the same build flags, so both arms lose the same).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
spec=${1:?usage: bench/python-build.sh <version>[t], e.g. 3.14t}
unset PYTHON  # make's PYTHON= (the spec above) is no variable of CPython's own build
minor=${spec%t}
table="$root/bench/python-builds.toml"
read_table() {
  python3 - "$table" "$minor" <<'PY'
import sys, tomllib
builds = tomllib.load(open(sys.argv[1], "rb"))["builds"]
b = builds.get(sys.argv[2])
if b is None:
    valid = ", ".join(f"{m}, {m}t" for m in builds)
    print(f"python-build: unknown version {sys.argv[2]!r}; valid: {valid}", file=sys.stderr)
    raise SystemExit(2)
if "unreachable" in b:
    print(f"python-build: {sys.argv[2]}: {b['unreachable']}", file=sys.stderr)
    raise SystemExit(2)
print(b["version"], b["url"], b["sha256"])
PY
}
row=$(read_table) || exit 2
read -r version url sha256 <<<"$row"
# The real path: .bench/tools may be a link (a git worktree's to its main checkout), and the
# prefix is compiled into the interpreter's sysconfig.
mkdir -p "$root/.bench/tools"
prefix="$(realpath "$root/.bench/tools")/python/$spec"
flags=(--prefix="$prefix" --without-ensurepip)
[ "$spec" = "$minor" ] || flags+=(--disable-gil)
stamp="$version $sha256 ${flags[*]:1}"
if [ -x "$prefix/bin/python3" ] && [ "$(cat "$prefix/.build" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
work="$root/.bench/build/python-$spec"
rm -rf "$work" "$prefix"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
tarball="$work/src.tar.xz"
echo "python-build: fetching CPython $version ($url)" >&2
curl -fsSL --retry 3 -o "$tarball" "$url"
got=$(sha256sum "$tarball" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
  echo "python-build: $url has sha256 $got, expected $sha256; not building" >&2
  exit 1
fi
tar -xJf "$tarball" -C "$work" --strip-components=1
echo "python-build: building $spec (configure ${flags[*]:1}); log in $work/build.log" >&2
(cd "$work" && ./configure "${flags[@]}" && make -j2 && make install) >"$work/build.log" 2>&1 || {
  tail -n 30 "$work/build.log" >&2
  echo "python-build: building CPython $spec failed (log above)" >&2
  trap - EXIT
  exit 1
}
echo "$stamp" >"$prefix/.build"
echo "python-build: $prefix/bin/python3 ready" >&2
