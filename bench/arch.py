"""Architectures: host detection and the normalisation of ARCH values.

Input: `uname -m` and the user's ARCH. Output: `amd64` or `arm64`, or ArchError naming the
valid choices. Emulated runs (ARCH different from the host's) are the arch issue's work.
"""

from __future__ import annotations

import platform

ALIASES = {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}


class ArchError(ValueError):
    """An ARCH value that is not one of the known names."""


def normalize_arch(value: str) -> str:
    """amd64/x86_64 -> amd64, arm64/aarch64 -> arm64; anything else raises ArchError."""
    try:
        return ALIASES[value.strip().lower()]
    except KeyError:
        raise ArchError(f"unknown ARCH {value!r}; valid: {', '.join(sorted(ALIASES))}") from None


def host_arch() -> str:
    """This machine's arch, normalised."""
    return normalize_arch(platform.machine())
