"""Deterministic seed data: db/schema.sql and db/fortunes.tsv -> the SQL script that fills the DB.

Input: the files in db/. Output: the schema version stamp and a psql script (schema, the
10,000 `world` rows drawn from a fixed seed, the `fortune` rows). Pure functions: tested offline.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

DB_DIR = Path(__file__).resolve().parents[2] / "db"
WORLD_ROWS = 10_000
WORLD_SEED = 20261123
# Bump when the generation below changes in a way the files' hash cannot see.
GENERATOR_VERSION = 1


def world_rows(count: int = WORLD_ROWS, seed: int = WORLD_SEED) -> list[tuple[int, int]]:
    """(id, randomnumber) for ids 1..count, the same on every machine."""
    rng = random.Random(seed)
    return [(i, rng.randint(1, 10_000)) for i in range(1, count + 1)]


def fortunes(db_dir: Path = DB_DIR) -> list[tuple[int, str]]:
    """The fortune rows from db/fortunes.tsv."""
    rows = []
    for line in (db_dir / "fortunes.tsv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            ident, message = line.split("\t", 1)
            rows.append((int(ident), message))
    return rows


def schema_version(db_dir: Path = DB_DIR) -> str:
    """A stamp that changes whenever the schema, the data files or the generator change."""
    digest = hashlib.sha256(str(GENERATOR_VERSION).encode())
    for name in ("schema.sql", "fortunes.tsv"):
        digest.update((db_dir / name).read_bytes())
    return digest.hexdigest()[:16]


def _copy_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def seed_script(db_dir: Path = DB_DIR) -> str:
    """A psql script that creates and fills the tables and stamps the schema version."""
    parts = [(db_dir / "schema.sql").read_text(), "COPY world (id, randomnumber) FROM stdin;"]
    parts += [f"{i}\t{n}" for i, n in world_rows()]
    parts += ["\\.", "COPY fortune (id, message) FROM stdin;"]
    parts += [f"{i}\t{_copy_escape(m)}" for i, m in fortunes(db_dir)]
    parts += [
        "\\.",
        f"INSERT INTO bench_meta (schema_version) VALUES ('{schema_version(db_dir)}');",
    ]
    return "\n".join(parts) + "\n"
