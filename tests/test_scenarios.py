"""The failure stories from shared/seeds, end to end: the real client, over HTTP, against the fixture."""

from __future__ import annotations

import pytest

from rwo_failover.observe.lookups import gets_before_list
from rwo_failover.run.exitcodes import EXIT_OK
from rwo_testkit import fake_cluster as fc


def healthy_cluster(api, count: int = 3) -> None:
    for i in range(count):
        fc.live_node(api, f"worker-{i}")


def names(api, plural: str) -> set[str]:
    """The objects there; of VolumeAttachments, those nobody deleted (a deleted one stays, marked, until its CSI
    attacher has detached it, as on kube-apiserver)."""
    return {o["metadata"]["name"] for o in api.objects(plural)
            if plural != "volumeattachments" or not o["metadata"].get("deletionTimestamp")}


def test_statefulset_pod_stuck_terminating_is_force_deleted_and_its_volume_released(api, run_pass):
    # Seeds 001/002: a StatefulSet pod Terminating forever on a dead, tainted node.
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    _, _, va = fc.add_volume(api, "data-es-0", namespace="logging", attached_to="worker-dead")
    api.add(fc.pod("es-0", "worker-dead", namespace="logging", claims=["data-es-0"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK
    assert "es-0" not in names(api, "pods")
    assert va["metadata"]["name"] not in names(api, "volumeattachments")
    deletes = [r for r in result.requests if r.verb == "delete"]
    assert [r.resource for r in deletes] == ["pods", "volumeattachments"], "the pod must go before its attachment"
    assert deletes[0].body["gracePeriodSeconds"] == 0
    assert deletes[0].body["preconditions"]["uid"]
    assert result.summary["pods_deleted"] == 1 and result.summary["attachments_deleted"] == 1


def test_deployment_pod_unknown_with_blocked_replacement(api, run_pass):
    # Seed 000: the old pod is Unknown, its replacement sits in ContainerCreating on a healthy node.
    healthy_cluster(api)
    fc.dead_node(api, "ip-10-0-12-219")
    _, _, va = fc.add_volume(api, "postgresql", attached_to="ip-10-0-12-219")
    api.add(fc.pod("postgresql-1-6ppzs", "ip-10-0-12-219", claims=["postgresql"], owner="ReplicaSet",
                   phase="Unknown", reason="NodeLost"))
    api.add(fc.pod("postgresql-1-4jtfz", "worker-0", claims=["postgresql"], owner="ReplicaSet",
                   phase="Pending", ready="False"))

    result = run_pass()

    assert result.code == EXIT_OK
    assert names(api, "pods") == {"postgresql-1-4jtfz"}, "only the pod on the dead node goes"
    assert names(api, "volumeattachments") == set()
    assert va["metadata"]["name"] in {r.name for r in result.requests if r.verb == "delete"}


def test_nfs_style_rwo_volume_without_attachment_deletes_only_the_pod(api, run_pass):
    # Seed 004: NFS-backed RWO claims have no VolumeAttachment; the pod still has to go.
    healthy_cluster(api)
    fc.dead_node(api, "acp-worker01")
    fc.add_volume(api, "redis-data", namespace="kubeflow", csi=False, attached_to="acp-worker01")
    api.add(fc.pod("redis-master-0", "acp-worker01", namespace="kubeflow", claims=["redis-data"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK
    assert "redis-master-0" not in names(api, "pods")
    assert [r.resource for r in result.requests if r.verb == "delete"] == ["pods"]
    assert result.summary["attachments_planned"] == 0


def test_rwx_only_pod_is_left_alone(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "shared", modes=("ReadWriteMany",), attached_to="worker-dead")
    api.add(fc.pod("uploader-0", "worker-dead", claims=["shared"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK
    assert "uploader-0" in names(api, "pods")
    assert len(names(api, "volumeattachments")) == 1
    assert [r for r in api.mutations() if r.verb == "delete"] == []
    skip = [line for line in result.lines("skipped") if line["object"] == "default/uploader-0"]
    assert skip and "ReadWriteOnce" in skip[0]["reason"]


def test_generic_ephemeral_rwo_volume_counts(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    # The ephemeral volume controller names the claim <pod>-<volume>.
    _, _, va = fc.add_volume(api, "cache-0-scratch", attached_to="worker-dead")
    api.add(fc.pod("cache-0", "worker-dead", ephemeral=["scratch"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK
    assert "cache-0" not in names(api, "pods")
    assert va["metadata"]["name"] not in names(api, "volumeattachments")


def test_running_but_not_ready_pod_on_proven_down_node_is_not_left_for_the_toleration(api, run_pass):
    # Measured on v1.36: Running with Ready=False for the whole 300 s toleration before Terminating.
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead", down_for=90)
    fc.add_volume(api, "data-db-0", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], phase="Running", ready="False"))

    result = run_pass()

    assert result.code == EXIT_OK
    assert "db-0" not in names(api, "pods")


def test_stuck_states_setting_narrows_what_counts(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "data-db-0", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], phase="Running", ready="False"))

    result = run_pass(STUCK_POD_STATES="Terminating,Unknown")

    assert result.code == EXIT_OK
    assert "db-0" in names(api, "pods")
    assert not [r for r in api.mutations() if r.verb == "delete"]


def test_shared_rwo_volume_is_released_once_after_both_pods_are_gone(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "shared-rwo", attached_to="worker-dead")
    api.add(fc.pod("a-0", "worker-dead", claims=["shared-rwo"], terminating=True))
    api.add(fc.pod("b-0", "worker-dead", claims=["shared-rwo"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK
    deletes = [(r.resource, r.name) for r in result.requests if r.verb == "delete"]
    assert [d[0] for d in deletes] == ["pods", "pods", "volumeattachments"]


def test_events_are_recorded_on_pod_claim_and_node(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "data-db-0", namespace="prod", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-dead", namespace="prod", claims=["data-db-0"], terminating=True))

    assert run_pass().code == EXIT_OK

    events = {(e["involvedObject"]["kind"], e["involvedObject"]["name"]): e for e in api.objects("events")}
    assert set(events) == {("Pod", "db-0"), ("PersistentVolumeClaim", "data-db-0"), ("Node", "worker-dead")}
    assert events[("Pod", "db-0")]["metadata"]["namespace"] == "prod"
    assert events[("Node", "worker-dead")]["metadata"]["namespace"] == "default"
    node_message = events[("Node", "worker-dead")]["message"]
    assert "node.cloudprovider.kubernetes.io/shutdown" in node_message and "prod/db-0" in node_message


def test_second_pass_finds_nothing_to_do(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "data-db-0", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], terminating=True))
    assert run_pass().code == EXIT_OK

    again = run_pass()

    assert again.code == EXIT_OK
    assert not [r for r in again.requests if r.could_change]
    assert again.summary["pods_planned"] == 0


def test_dry_run_reads_and_prints_the_plan_but_changes_nothing(api, run_pass):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    _, _, va = fc.add_volume(api, "data-db-0", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], terminating=True))

    result = run_pass(DRY_RUN="true")

    assert result.code == EXIT_OK
    assert not [r for r in result.requests if r.could_change]
    assert [line["pod"] for line in result.lines("dry-run: would force-delete pod")] == ["default/db-0"]
    assert [line["volumeattachment"] for line in result.lines("dry-run: would delete VolumeAttachment")] == \
        [va["metadata"]["name"]]
    assert result.summary["dry_run"] is True and result.summary["pods_planned"] == 1


def test_read_cost_is_bounded_by_down_nodes_not_by_cluster_size(api, run_pass):
    for i in range(40):
        fc.live_node(api, f"worker-{i:02d}")
        for j in range(5):
            api.add(fc.pod(f"app{i}-{j}", f"worker-{i:02d}", ready="True"))
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "data-db-0", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], terminating=True))

    result = run_pass(PAGE_SIZE="10")

    pod_lists = [r for r in result.requests if r.verb == "list" and r.resource == "pods"]
    assert [r.query.get("fieldSelector") for r in pod_lists] == ["spec.nodeName=worker-dead"]
    node_lists = [r for r in result.requests if r.verb == "list" and r.resource == "nodes"]
    assert len(node_lists) == 5 and all("resourceVersion" not in r.query for r in node_lists), \
        "41 nodes in pages of 10, consistent (issue 36): the brakes judge what etcd holds"
    assert result.code == EXIT_OK


def test_attachment_left_behind_after_its_pod_was_force_deleted_is_released(api, run_pass):
    # Seed 000's manual fix: someone force-deleted the pod, and the attachment still pins the volume to the
    # dead node. Also what an earlier pass leaves when its attachment delete failed.
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    _, _, orphan = fc.add_volume(api, "data-db-0", attached_to="worker-dead")
    api.add(fc.pod("db-0", "worker-1", claims=["data-db-0"], phase="Pending"))  # the blocked replacement

    result = run_pass()

    assert result.code == EXIT_OK
    assert [(r.resource, r.name) for r in result.requests if r.verb == "delete"] == \
        [("volumeattachments", orphan["metadata"]["name"])]
    assert [r.name for r in result.requests if r.resource == "persistentvolumes"] == ["pv-default-data-db-0"]
    assert "db-0" in names(api, "pods"), "the replacement is untouched"


@pytest.mark.parametrize("env, volume_kwargs, pod_on_node", [
    ({}, {"modes": ("ReadWriteMany",)}, False),                                    # not RWO
    ({}, {"annotations": {"rwo-failover.io/opt-out": "true"}}, False),             # opted out
    ({"EXCLUDE_NAMESPACES": "default"}, {}, False),                                # namespace filtered
    ({"POD_SELECTOR": "app=db"}, {}, False),                                       # no pod left to match
    ({}, {}, True),                                                                # a kept pod still uses it
])
def test_orphan_like_attachments_that_must_stay(api, run_pass, env, volume_kwargs, pod_on_node):
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "data-db-0", attached_to="worker-dead", **volume_kwargs)
    if pod_on_node:
        api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], terminating=True,
                       annotations={"rwo-failover.io/opt-out": "true"}))

    result = run_pass(**env)

    assert result.code == EXIT_OK
    assert [r for r in api.mutations() if r.verb == "delete"] == []
    assert len(names(api, "volumeattachments")) == 1


def test_many_claims_are_read_with_one_list_instead_of_a_get_each(api, run_pass):
    healthy_cluster(api, 40)
    fc.dead_node(api, "worker-dead")
    for i in range(25):
        fc.add_volume(api, f"data-db-{i}", namespace=f"team-{i % 3}", attached_to="worker-dead")
        api.add(fc.pod(f"db-{i}", "worker-dead", namespace=f"team-{i % 3}", claims=[f"data-db-{i}"],
                       terminating=True))
    fc.add_volume(api, "unrelated", namespace="team-9")

    result = run_pass()

    claim_reads = [r.verb for r in result.requests if r.resource == "persistentvolumeclaims"
                   and r.verb in ("get", "list") and "labelSelector" not in r.query]
    assert claim_reads == ["list"], "26 claims: one list (answered whole at resourceVersion 0), not 26 GETs"
    marks = [r for r in result.requests if r.resource == "configmaps" and r.verb == "create" and r.could_change
             and r.body["metadata"]["name"].startswith("rwo-recovery-")]
    assert len(marks) == 25, "one recovery record per freed claim"
    assert not [r for r in result.requests if r.resource == "persistentvolumeclaims" and r.verb == "patch"]
    assert result.code == EXIT_OK
    assert result.summary["pods_deleted"] == 25 and result.summary["attachments_deleted"] == 25
    assert names(api, "persistentvolumeclaims") and len(names(api, "volumeattachments")) == 0


def test_in_a_large_cluster_a_few_dozen_claims_are_a_get_each_not_a_cluster_wide_list(api, run_pass):
    """A cluster-wide list costs what the cluster holds (at 5,000 nodes, 20,000 claims: 0.30 s of a pass in the
    reaction benchmark, and as much again for PVs); GETs cost what the pass needs. So the bound on GETs grows
    with the node count (one per 50 nodes, at least 20): 30 claims of one dead node at 1,500 nodes are 30 GETs."""
    healthy_cluster(api, 1500)
    fc.dead_node(api, "worker-dead")
    for i in range(30):
        fc.add_volume(api, f"data-db-{i}", attached_to="worker-dead")
        api.add(fc.pod(f"db-{i}", "worker-dead", claims=[f"data-db-{i}"], terminating=True))

    result = run_pass(DRY_RUN="true")

    for resource in ("persistentvolumeclaims", "persistentvolumes"):
        reads = [r.verb for r in result.requests if r.resource == resource and "labelSelector" not in r.query]
        assert reads == ["get"] * 30, f"{resource}: a GET each, no list of the whole cluster"
    assert result.code == EXIT_OK and result.summary["pods_planned"] == 30


def test_the_gets_a_tenant_can_cause_stop_at_100_whatever_the_node_count():
    """A tenant chooses how many claims its pods on a down node mount: up to the bound, each is a GET (claims and PVs:
    twice) on every pass that inspects the node. Past 5,000 nodes the bound stops growing (found by an attack: the
    bound grew with nodes that say nothing about how many claims a list would hold)."""
    assert [gets_before_list(n) for n in (0, 1000, 5000, 10000, 50000)] == [20, 20, 100, 100, 100]


def test_attachment_not_marked_attached_is_deleted_too(api, run_pass):
    # A detach already in flight (status.attached=false) still pins the volume to the dead node.
    healthy_cluster(api)
    fc.dead_node(api, "worker-dead")
    fc.add_volume(api, "data-db-0")
    half_detached = api.add(fc.attachment("pv-default-data-db-0", "worker-dead", attached=False))
    api.add(fc.pod("db-0", "worker-dead", claims=["data-db-0"], terminating=True))

    result = run_pass()

    assert result.code == EXIT_OK
    assert half_detached["metadata"]["name"] not in names(api, "volumeattachments")
