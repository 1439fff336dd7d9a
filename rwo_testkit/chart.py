"""The Helm chart, linted and rendered with Helm v4's own Go SDK (helm-python-sdk: libhelm_c, no binary).

Used by tests/test_chart.py, the e2e tier, and .ci/run: `python -m rwo_testkit.chart lint`, and
`python -m rwo_testkit.chart render OUTDIR`, whose files go through the same validators as the kustomize
renders.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

CHART = Path(__file__).resolve().parent.parent / "charts" / "rwo-failover"
# The chart refuses an image without a digest (a tag can move), so every render here pins one, as every install
# must (README Install): this stand-in, unless the values name image.digest or image.allowTagWithoutDigest.
TEST_DIGEST = "sha256:" + "0" * 64


def pinned(values: dict | None) -> dict:
    """`values` with image.digest set to TEST_DIGEST, unless they say something of the digest themselves."""
    values = dict(values or {})
    image = dict(values.get("image") or {})
    if "digest" not in image and "allowTagWithoutDigest" not in image:
        image["digest"] = TEST_DIGEST
    values["image"] = image
    return values
# What CI renders and validates: each mode, and each optional component.
MODES: dict[str, dict[str, Any]] = {
    "cronjob-mode": {"mode": "cronjob"},
    "ha-mode": {"mode": "ha"},
    "cronjob-mode-networkfence": {"mode": "cronjob",
                                  "fencing": {"mode": "networkfence", "networkFence": {"className": "ceph"}}},
    "ha-mode-status-viewer": {"mode": "ha", "statusViewer": {"create": True}},
    # The values of a chart beside other charts (issue 44): three replicas, labels, a CA bundle, a spread.
    "ha-mode-extras": {"mode": "ha", "ha": {"replicas": 3}, "nameOverride": "failover",
                       "commonLabels": {"example.com/team": "storage"},
                       "extraEnv": [{"name": "SSL_CERT_FILE", "value": "/etc/ca/ca.crt"}],
                       "extraVolumes": [{"name": "ca", "configMap": {"name": "ca-bundle"}}],
                       "extraVolumeMounts": [{"name": "ca", "mountPath": "/etc/ca", "readOnly": True}],
                       "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                      "whenUnsatisfiable": "ScheduleAnyway"}]},
}


def lint(values: dict | None = None) -> dict:
    """`helm lint --strict`: the report, {"messages": [{"severity", "path", "error"}], "errors": [...]}."""
    return helm.lint(str(CHART), pinned(values), strict=True)


# The order `helm install` creates objects in (Helm's releaseutil.InstallOrder, the kinds this chart has), so
# `kubectl apply -f` of a render creates the Namespace before what lives in it.
INSTALL_ORDER = ("PriorityClass", "Namespace", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount",
                 "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Deployment", "CronJob")


def render_text(values: dict | None = None, name: str = "rwo-failover", namespace: str = "rwo-failover") -> str:
    """`helm template`: every manifest, in Helm's install order, as one multi-document YAML stream."""
    values = pinned(values)
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(values)
        rendered = chart.render(values, name=name, namespace=namespace, is_install=True)
    docs = []
    for path in sorted(p for p in rendered if p.endswith(".yaml")):
        for body in re.split(r"^---\n", rendered[path], flags=re.M):
            kind = re.search(r"^kind: (\S+)", body, re.M)
            if kind:
                docs.append((kind[1], f"---\n# Source: {path}\n{body.strip()}\n"))
    rank = {kind: i for i, kind in enumerate(INSTALL_ORDER)}
    return "".join(text for _kind, text in sorted(docs, key=lambda d: rank.get(d[0], len(rank))))


def render(values: dict | None = None, name: str = "rwo-failover", namespace: str = "rwo-failover") -> list[dict]:
    return [d for d in yaml.safe_load_all(render_text(values, name, namespace)) if d]


def workload(docs: list[dict]) -> tuple[list[str], dict[str, str]]:
    """The args and env of the render's one workload (the CronJob's or the Deployment's container)."""
    [found] = [d for d in docs if d["kind"] in ("CronJob", "Deployment")]
    container = found["spec"].get("jobTemplate", found)["spec"]["template"]["spec"]["containers"][0]
    return container.get("args") or [], {e["name"]: e["value"] for e in container["env"]}


def notes(values: dict | None = None, name: str = "rwo-failover", namespace: str = "rwo-failover") -> str:
    """What `helm install` prints after installing: the rendered NOTES.txt."""
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(pinned(values), name=name, namespace=namespace, is_install=True)
    [text] = [body for path, body in rendered.items() if path.endswith("NOTES.txt")]
    return text


def lint_all() -> int:
    """`helm lint --strict` with the defaults and each of MODES' values; 1 if any warning or error."""
    failed = 0
    for values in (None, *MODES.values()):
        report = lint(values)
        bad = [m for m in report["messages"] if m["severity"] >= 2] + report["errors"]  # 2 warning, 3 error
        print(f"helm lint --strict {values or '(defaults)'}: {bad or 'OK'}")
        failed |= bool(bad)
    return int(failed)


def render_all(out: Path) -> int:
    """Write MODES' renders into `out` (chart-<mode>.yaml)."""
    out.mkdir(parents=True, exist_ok=True)
    for label, values in MODES.items():
        (out / f"chart-{label}.yaml").write_text(render_text(values))
        print(out / f"chart-{label}.yaml")
    return 0


def main(argv: list[str]) -> int:
    """`python -m rwo_testkit.chart lint` or `python -m rwo_testkit.chart render OUTDIR`."""
    if argv[:1] == ["lint"] and len(argv) == 1:
        return lint_all()
    if argv[:1] == ["render"] and len(argv) == 2:
        return render_all(Path(argv[1]))
    print("usage: python -m rwo_testkit.chart lint | render OUTDIR", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
