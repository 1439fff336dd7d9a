"""The plan as a short table for people, like `kubectl get` or `terraform plan`: pure over the Plan.

Each tainted node with its verdict and why; each pod, attachment and taint the pass would release or add;
each skip and why; and a refusal, if the brake tripped. The JSON log lines stay the record for machines;
this is printed on a terminal (or with OUTPUT=table) before the pass acts.

It promises only what the pass will do. With fencing, a node is released only once its fencing is confirmed
(act/actor.py, act/fencing.py), so a node whose fence step is still open is listed apart from the releases: under
AFTER FENCING when this pass asks (or waits) and may still act, under NOT RELEASED when it will not.

Every string here comes from the cluster (names, a kubelet's reasons, a storage controller's NetworkFence
message) and may hold a newline, a carriage return, an ANSI escape or a bidi override: each cell is made
inert (escaped, visibly) and capped, so no message can forge a line or restyle the operator's terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model import OUT_OF_SERVICE_KEY, OUT_OF_SERVICE_VALUE
from ..planner.fencing import PENDING, REQUEST
from ..planner.types import NodePlan, Plan

Row = tuple[str, ...]
# A cell longer than this is cut: valid names never are (a pod key is at most 317 characters), a storage
# controller's message may be kilobytes.
MAX_NAME = 320
MAX_WHY = 200
# What the pass does about each open fence step, said after the planner's reason.
FENCE_NEXT = {REQUEST: "asked for in this pass, which waits for the answer",
              PENDING: "this pass waits for the answer"}


def inert(text: object, limit: int = MAX_WHY) -> str:
    """`text` with every character that is not printable shown as its escape (\\n, \\x1b, \\u202e), and
    cut to `limit` characters."""
    shown = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(text))
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def _table(header: Row, rows: Sequence[Row]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is never padded. Every cell is made inert."""
    rows = [tuple(inert(cell, MAX_NAME) for cell in row[:-1]) + (inert(row[-1]),) for row in rows]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header) - 1)]
    # widths has no entry for the last column: zip stops before it, and the last cell goes in unpadded
    return ["  ".join([cell.ljust(width) for cell, width in zip(row, widths, strict=False)] + [row[-1]]).rstrip()
            for row in (header, *rows)]


def table(header: Row, rows: Sequence[Row]) -> list[str]:
    """_table, for the other reports for people (status_view.py)."""
    return _table(header, rows)


def _actions(node_plan: NodePlan) -> list[Row]:
    node = node_plan.verdict.node
    rows: list[Row] = []
    if node_plan.fence:
        then = FENCE_NEXT.get(node_plan.fence, "nothing on the node is touched")
        rows.append((node, "fence", node, f"{node_plan.fence}: {node_plan.fence_reason}; {then}"))
    if node_plan.add_taint:
        rows.append((node, "taint", f"{OUT_OF_SERVICE_KEY}={OUT_OF_SERVICE_VALUE}:NoExecute",
                     "so Kubernetes force-detaches the node's volumes"))
    for pod in node_plan.pods:
        rows.append((node, "pod", pod.key, f"{pod.reason}; frees {', '.join(pod.claims) or 'no claim'}"))
    for att in node_plan.attachments:
        after = f", once {', '.join(att.after_pods)} is gone" if att.after_pods else " (orphaned: no pod uses it)"
        rows.append((node, "volumeattachment", att.name, f"PV {att.volume} of {att.claim}{after}"))
    return rows


def _section(title: str, node_plans: Sequence[NodePlan]) -> list[str]:
    """A heading with the counts, then one row per action of these nodes; nothing when there are none."""
    rows = [row for node_plan in node_plans for row in _actions(node_plan)]
    if not rows:
        return []
    pods, attachments = sum(len(n.pods) for n in node_plans), sum(len(n.attachments) for n in node_plans)
    return ["", title.format(counts=f"{pods} pods, {attachments} VolumeAttachments"),
            *_table(("NODE", "KIND", "OBJECT", "WHY"), rows)]


def _releases(plan: Plan, dry_run: bool) -> list[str]:
    """The nodes the pass acts on now; those whose fencing is still asked for or awaited, which it acts on
    only once fencing is confirmed within the pass; and those it will not touch at all."""
    verb = "WOULD" if dry_run else "WILL"
    now = [n for n in plan.nodes if n.fence is None]
    after = [n for n in plan.nodes if n.fence in FENCE_NEXT]
    kept = [n for n in plan.nodes if n.fence is not None and n.fence not in FENCE_NEXT]
    return (_section(f"{verb} RELEASE ({{counts}})", now)
            + _section(f"AFTER FENCING ({{counts}}): {'would be released' if dry_run else 'released'} only if "
                       "this pass sees the node's fencing confirmed; until then nothing on it is touched", after)
            + _section("NOT RELEASED, FENCING NOT CONFIRMED ({counts} stay): nothing on the node is touched", kept))


def render(plan: Plan, dry_run: bool) -> str:
    """The plan as text, ending with a newline."""
    title = "PLAN (dry run: nothing will be changed)" if dry_run else "PLAN (this pass carries it out now)"
    lines = [title, ""]
    if not plan.verdicts:
        lines.append(f"No node carries a shutdown taint ({plan.total_nodes} nodes, {plan.not_ready} not Ready): "
                     "nothing to do.")
    else:
        lines += _table(("NODE", "VERDICT", "WHY"), [(v.node, v.state.value, v.reason) for v in plan.verdicts])
    verb = "WOULD" if dry_run else "WILL"
    if plan.refusal:
        lines += ["", f"REFUSED, nothing is touched: {inert(plan.refusal)}"]
    else:
        lines += _releases(plan, dry_run)
    if plan.untaint:
        lines += ["", f"{verb} REMOVE OUR OUT-OF-SERVICE TAINT FROM: {inert(', '.join(plan.untaint), MAX_NAME)}"]
    if plan.skips:
        lines += ["", f"SKIPPED ({len(plan.skips)})"]
        lines += _table(("KIND", "OBJECT", "WHY"), [(s.kind, s.name, s.reason) for s in plan.skips])
    return "\n".join(lines) + "\n"
