"""Load-balancer study files: studies/lb/<name>.toml, read and validated.

Input: the TOML (a [run] table and arms: server and knobs, the front (none, nginx, alb),
upstream keep-alive, the sysctls set inside the arm's namespace, oha's rate or the race's
burst pattern, the route; optional published figures). Output: LbStudy/LbArm, or StudyError
naming the file and the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bench.core.registry import load_all
from bench.studies.study import StudyError

LB_DIR = Path(__file__).resolve().parents[2] / "studies" / "lb"
FRONTS = ("none", "nginx", "alb")
# [run] or an arm may set these (the type each must have).
SETTINGS: dict[str, type] = {
    "front": str,
    "upstream_keepalive": bool,
    "client_keepalive": bool,
    "proxy_timeout": int,
    "sysctls": dict,
    "path": str,
    "rate": int,
    "connections": int,
    "duration": int,
    "timeout": int,
    "knobs": dict,
    "race_gaps_ms": list,
    "race_burst": int,
    "race_rounds": int,
    # Measure the server's idle close first (seconds allowed), and set the race's gaps at
    # these offsets (ms) from it: the timeout is measured, not taken from the declaration.
    "probe_limit": int,
    "race_offsets_ms": list,
    # Seconds of idle gaps an arm may spend: fewer rounds, then fewer gaps (bench.load.race).
    "race_budget": int,
}
TOP = ("title", "source", "claim", "differs", "run", "arm", "expect")
# Optional: the source's figures per arm ({arm id = failed %}), shown beside ours.


@dataclass(frozen=True)
class LbArm:
    """One arm: a server behind a front in a namespace with its sysctls."""

    id: str
    label: str
    server: str
    settings: dict

    def get(self, key: str, default: object = None) -> object:
        """A setting of the arm, else of [run]."""
        return self.settings.get(key, default)


@dataclass(frozen=True)
class LbStudy:
    """A load-balancer study file, validated."""

    name: str
    title: str
    source: str
    claim: str
    differs: str
    expect: str
    arms: tuple[LbArm, ...]
    published: dict[str, float] = field(default_factory=dict)


def lb_study_names() -> list[str]:
    """Every load-balancer study (studies/lb/*.toml)."""
    return sorted(p.stem for p in LB_DIR.glob("*.toml"))


def _check(path: Path, where: str, settings: dict) -> None:
    for key, value in settings.items():
        kind = SETTINGS.get(key)
        if kind is None:
            raise StudyError(
                f"{path}: {where} sets unknown key {key!r}; valid: {', '.join(SETTINGS)}"
            )
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise StudyError(f"{path}: {where} {key} must be a {kind.__name__}")
    if settings.get("front", "none") not in FRONTS:
        raise StudyError(f"{path}: {where} front must be one of {', '.join(FRONTS)}")


def load_lb_study(name: str) -> LbStudy:
    """Read and validate studies/lb/<name>.toml (StudyError names file and key)."""
    path = LB_DIR / f"{name}.toml"
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise StudyError(f"{path}: {exc}") from None
    missing = [k for k in TOP if k not in data]
    if missing:
        raise StudyError(f"{path}: missing {', '.join(missing)}")
    _check(path, "[run]", data["run"])
    known = set(load_all())
    arms = []
    for raw in data["arm"]:
        arm_id, label, server = raw.get("id"), raw.get("label"), raw.get("server")
        if not all(isinstance(v, str) for v in (arm_id, label, server)):
            raise StudyError(f"{path}: each arm needs the strings id, label, server")
        if server not in known:
            raise StudyError(f"{path}: arm {arm_id} names unknown server {server!r}")
        own = {k: v for k, v in raw.items() if k not in ("id", "label", "server")}
        _check(path, f"arm {arm_id}", own)
        settings = {**data["run"], **own}
        settings["sysctls"] = {**data["run"].get("sysctls", {}), **own.get("sysctls", {})}
        arms.append(LbArm(arm_id, label, server, settings))
    return LbStudy(
        name,
        data["title"],
        data["source"],
        data["claim"].strip(),
        data["differs"].strip(),
        data["expect"].strip(),
        tuple(arms),
        _published(path, data.get("published", {}), {a.id for a in arms}),
    )


def _published(path: Path, raw: object, arm_ids: set[str]) -> dict[str, float]:
    if not isinstance(raw, dict) or not all(
        k in arm_ids and isinstance(v, int | float) for k, v in raw.items()
    ):
        raise StudyError(f"{path}: `published` must map arm ids to numbers (failed %)")
    return {str(k): float(v) for k, v in raw.items()}


def is_race(arm: LbArm) -> bool:
    """An arm of the keep-alive race (bursts and gaps, not oha)."""
    return arm.get("race_gaps_ms") is not None or arm.get("race_offsets_ms") is not None
