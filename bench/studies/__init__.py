"""The one study engine: studies/<name>.toml run by the harness and rendered in summary.md.

Input: study files (schema), make study's NAME, DURATION, RESULTS, SEED (runner.run). Output:
a record per arm and run (through the harness's Recorder), and every study's summary section
(sections.summary_sections). Modules by job: schema, arms, runner, namespace, metrics,
verdict, sections, network.
"""
