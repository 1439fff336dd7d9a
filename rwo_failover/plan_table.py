"""The plan as a short table for people, like `kubectl get` or `terraform plan`: pure over the Plan.

Each tainted node with its verdict and why; each pod, attachment and taint the pass would release or add;
each skip and why; and a refusal, if the brake tripped. The JSON log lines stay the record for machines;
this is printed on a terminal (or with OUTPUT=table) before the pass acts.
"""

from __future__ import annotations

from typing import Sequence

from .model import OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE
from .planner.types import NodePlan, Plan

Row = tuple[str, ...]


def _table(header: Row, rows: Sequence[Row]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is never padded."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    return ["  ".join([cell.ljust(width) for cell, width in zip(row, widths)] + [row[-1]]).rstrip()
            for row in (header, *rows)]


def _actions(node_plan: NodePlan) -> list[Row]:
    node = node_plan.verdict.node
    rows: list[Row] = []
    if node_plan.fence:
        rows.append((node, "fence", node, f"{node_plan.fence}: {node_plan.fence_reason}".rstrip(": ")))
    if node_plan.add_taint:
        rows.append((node, "taint", f"{OUT_OF_SERVICE_KEY}={OUT_OF_SERVICE_VALUE}:NoExecute",
                     "so Kubernetes force-detaches the node's volumes"))
    for pod in node_plan.pods:
        rows.append((node, "pod", pod.key, f"{pod.reason}; frees {', '.join(pod.claims) or 'no claim'}"))
    for att in node_plan.attachments:
        after = f", once {', '.join(att.after_pods)} is gone" if att.after_pods else " (orphaned: no pod uses it)"
        rows.append((node, "volumeattachment", att.name, f"PV {att.volume} of {att.claim}{after}"))
    return rows


def render(plan: Plan, dry_run: bool) -> str:
    """The plan as text, ending with a newline."""
    title = "PLAN (dry run: nothing will be changed)" if dry_run else "PLAN (this pass carries it out now)"
    lines = [title, ""]
    if not plan.verdicts:
        lines.append(f"No node carries a shutdown taint ({plan.total_nodes} nodes, {plan.not_ready} not Ready): "
                     "nothing to do.")
    else:
        lines += _table(("NODE", "VERDICT", "WHY"), [(v.node, v.state.value, v.reason) for v in plan.verdicts])
    actions = [row for node_plan in plan.nodes for row in _actions(node_plan)]
    verb = "WOULD" if dry_run else "WILL"
    if plan.refusal:
        lines += ["", f"REFUSED, nothing is touched: {plan.refusal}"]
    elif actions:
        lines += ["", f"{verb} RELEASE ({plan.pod_count} pods, {plan.attachment_count} VolumeAttachments)"]
        lines += _table(("NODE", "KIND", "OBJECT", "WHY"), actions)
    if plan.untaint:
        lines += ["", f"{verb} REMOVE OUR OUT-OF-SERVICE TAINT FROM: {', '.join(plan.untaint)}"]
    if plan.skips:
        lines += ["", f"SKIPPED ({len(plan.skips)})"]
        lines += _table(("KIND", "OBJECT", "WHY"), [(s.kind, s.name, s.reason) for s in plan.skips])
    return "\n".join(lines) + "\n"
