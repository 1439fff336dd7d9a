"""The Helm chart, linted and rendered with Helm v4's own Go SDK (helm-python-sdk: libhelm_c, no binary).

Used by tests/test_chart.py, the e2e tier, and .ci/run, which writes each mode's render to files
(`python -m rwo_testkit.chart OUTDIR`) for the same validators as the kustomize renders.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parent.parent / "charts" / "rwo-failover"
# What CI renders and validates: each mode, and each optional component.
MODES: dict[str, dict[str, Any]] = {
    "cronjob-mode": {"mode": "cronjob"},
    "ha-mode": {"mode": "ha"},
    "cronjob-mode-networkfence": {"mode": "cronjob",
                                  "settings": {"FENCING": "networkfence", "NETWORK_FENCE_CLASS": "ceph"}},
}


def lint(values: Optional[dict] = None) -> dict:
    """`helm lint --strict`: the report, {"messages": [{"severity", "path", "error"}], "errors": [...]}."""
    return helm.lint(str(CHART), values, strict=True)


def render_text(values: Optional[dict] = None, name: str = "rwo-failover", namespace: str = "rwo-failover") -> str:
    """`helm template`: every manifest, in a stable order, as one multi-document YAML stream."""
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(values)
        rendered = chart.render(values, name=name, namespace=namespace, is_install=True)
    parts = []
    for path in sorted(rendered):
        body = rendered[path].strip()
        if path.endswith(".yaml") and body:
            body = body.removeprefix("---").strip()
            parts.append(f"---\n# Source: {path}\n{body}\n")
    return "".join(parts)


def render(values: Optional[dict] = None, name: str = "rwo-failover", namespace: str = "rwo-failover") -> list[dict]:
    return [d for d in yaml.safe_load_all(render_text(values, name, namespace)) if d]


def main(argv: list[str]) -> int:
    """Write MODES' renders into the folder argv[0] (OUTDIR/chart-<mode>.yaml)."""
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    for label, values in MODES.items():
        (out / f"chart-{label}.yaml").write_text(render_text(values))
        print(out / f"chart-{label}.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
