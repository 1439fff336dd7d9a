"""rwo-failover: one safe pass from shutdown taint to released volume.

The packages are the pipeline, top to bottom (docs/architecture.md):

- `run`: the command line, one pass, the continuous loop, health, metrics, logs, exit codes;
- `act`: the only writer: live re-checks, taints, fencing, Events, recovery records;
- `observe`: the reads of one pass, into a Snapshot;
- `planner` (decide): pure, Snapshot + Settings -> Plan; and beside it `kube`, the API access layer;
- `settings`: the one table of settings, its parsing and its checks;
- `model`: one slim type per Kubernetes kind, and the matchers.

Each layer may use only the layers below it; pyproject.toml's import-linter contracts keep it so.
"""

__version__ = "0.1.0"
