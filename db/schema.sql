-- The benchmark schema (TechEmpower's tables). Bump SCHEMA_VERSION in bench/seed.py when this
-- changes: a cluster whose stamp differs is re-seeded.
CREATE TABLE world (
  id integer PRIMARY KEY,
  randomnumber integer NOT NULL DEFAULT 0
);
CREATE TABLE fortune (
  id integer PRIMARY KEY,
  message varchar(2048) NOT NULL
);
CREATE TABLE bench_meta (
  schema_version text NOT NULL
);
