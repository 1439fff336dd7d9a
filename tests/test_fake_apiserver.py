"""The fixture enforces the API semantics we rely on; checked through the official client."""

from __future__ import annotations

import email.utils
import json
from datetime import datetime
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from rwo_testkit import fake_cluster as fc


@pytest.fixture
def core(api, kubeconfig):
    cfg = k8s.Configuration()
    k8s_config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    return k8s.CoreV1Api(k8s.ApiClient(cfg))


def test_field_selector_on_node_name(api, core):
    api.add(fc.pod("a-0", "n1"))
    api.add(fc.pod("b-0", "n2"))
    found = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in found.items] == ["a-0"]
    assert len(core.list_pod_for_all_namespaces(field_selector="spec.nodeName!=n1").items) == 1


def test_unsupported_field_label_is_rejected(api, core):
    with pytest.raises(ApiException) as err:
        core.list_node(field_selector="spec.nodeName=n1")
    assert err.value.status == 400


def test_label_selector(api, core):
    api.add(fc.pod("a-0", "n1", labels={"app": "db", "tier": "x"}))
    api.add(fc.pod("b-0", "n1", labels={"app": "web"}))
    assert [p.metadata.name for p in core.list_namespaced_pod("default", label_selector="app in (db),tier").items] \
        == ["a-0"]
    with pytest.raises(ApiException) as err:
        core.list_namespaced_pod("default", label_selector="app in (db")
    assert err.value.status == 400


def test_pagination_with_limit_and_continue(api, core):
    for i in range(7):
        api.add(fc.node(f"n{i}"))
    first = core.list_node(limit=3)
    assert len(first.items) == 3 and first.metadata._continue and first.metadata.remaining_item_count == 4
    second = core.list_node(limit=3, _continue=first.metadata._continue)
    third = core.list_node(limit=3, _continue=second.metadata._continue)
    names = [n.metadata.name for page in (first, second, third) for n in page.items]
    assert names == [f"n{i}" for i in range(7)] and not third.metadata._continue
    with pytest.raises(ApiException) as err:
        core.list_node(limit=3, _continue=first.metadata._continue, resource_version="0")
    assert err.value.status == 400


@pytest.mark.parametrize("selector", ["", "metadata.name!=n9"])
def test_a_list_at_resource_version_0_ignores_the_limit_as_kube_apiserver_does(api, core, selector):
    """Measured on kube-apiserver v1.36.2: `?limit=2&resourceVersion=0` (with or without a field selector) answers
    every item, with no continue token; only a list without resourceVersion is paginated."""
    for i in range(7):
        api.add(fc.node(f"n{i}"))
    whole = core.list_node(limit=3, resource_version="0", field_selector=selector)
    assert len(whole.items) == 7 and not whole.metadata._continue and not whole.metadata.remaining_item_count


def test_delete_precondition_uid_mismatch_is_409(api, core):
    api.add(fc.pod("db-0", "n1"))
    options = k8s.V1DeleteOptions(grace_period_seconds=0, preconditions=k8s.V1Preconditions(uid="old-uid"))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("db-0", "default", body=options)
    assert err.value.status == 409 and "Precondition failed" in err.value.body
    assert api.get("pods", "db-0", "default") is not None


@pytest.mark.parametrize("field", ["uid", "resource_version"])
def test_an_empty_delete_precondition_is_a_precondition_as_on_kube_apiserver(api, core, field):
    """apiserver's etcd3 store checks `UID != nil && *UID != meta.UID` (and the same for resourceVersion): an
    empty string is a precondition no object meets, never "no precondition"."""
    api.add(fc.pod("db-0", "n1"))
    options = k8s.V1DeleteOptions(grace_period_seconds=0, preconditions=k8s.V1Preconditions(**{field: ""}))
    with pytest.raises(ApiException) as err:
        core.delete_namespaced_pod("db-0", "default", body=options)
    assert err.value.status == 409 and "Precondition failed" in err.value.body
    assert api.get("pods", "db-0", "default") is not None


def test_graceful_delete_of_scheduled_pod_only_marks_it_terminating(api, core):
    pod = api.add(fc.pod("db-0", "n1"))
    core.delete_namespaced_pod("db-0", "default")
    kept = api.get("pods", "db-0", "default")
    assert kept["metadata"]["deletionTimestamp"] and kept["metadata"]["deletionGracePeriodSeconds"] == 30
    options = k8s.V1DeleteOptions(grace_period_seconds=0, preconditions=k8s.V1Preconditions(uid=pod["metadata"]["uid"]))
    core.delete_namespaced_pod("db-0", "default", body=options)
    assert api.get("pods", "db-0", "default") is None


def test_finalizers_keep_a_deleted_object(api, core):
    pod = fc.pod("db-0", "n1")
    pod["metadata"]["finalizers"] = ["example.com/hold"]
    api.add(pod)
    core.delete_namespaced_pod("db-0", "default", grace_period_seconds=0)
    assert api.get("pods", "db-0", "default")["metadata"]["deletionTimestamp"]


def test_missing_object_is_404(api, core):
    with pytest.raises(ApiException) as err:
        core.read_node("ghost")
    assert err.value.status == 404


def test_event_namespace_must_match_involved_object(api, core):
    event = k8s.CoreV1Event.model_validate({"metadata": {"generateName": "x."},
                                            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "other"},
                                            "reason": "R", "type": "Normal", "message": "m"})
    with pytest.raises(ApiException) as err:
        core.create_namespaced_event("default", event)
    assert err.value.status == 422


def test_bad_token_is_401(api):
    cfg = k8s.Configuration(host=api.url, api_key={"authorization": "Bearer wrong"})
    with pytest.raises(ApiException) as err:
        k8s.CoreV1Api(k8s.ApiClient(cfg)).list_node()
    assert err.value.status == 401


def test_request_log_records_verb_resource_and_status(api, core):
    api.add(fc.node("n1"))
    core.read_node("n1")
    core.list_node(limit=1)
    assert [(r.verb, r.resource, r.name, r.status) for r in api.requests] == \
        [("get", "nodes", "n1", 200), ("list", "nodes", "", 200)]


# --- managedFields and the Date header: what rwo-failover times liveness with (checked against the real
# server in tests/e2e/test_e2e_liveness.py) -----------------------------------------------------------------

def _entries(obj, subresource=""):
    return [e for e in obj["metadata"]["managedFields"] if e.get("subresource", "") == subresource]


def raw(core, method: str, path: str, body=None, user_agent: str = "") -> tuple[int, dict, dict]:
    """One request through the official client's transport: status, headers and the parsed body."""
    client = core.api_client
    if user_agent:
        client.user_agent = user_agent
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/merge-patch+json"
    request = client.param_serialize(method=method, resource_path=path, header_params=headers, body=body,
                                     auth_settings=["BearerToken"])
    response = client.call_api(*request)
    data = response.read()
    return response.status, dict(response.getheaders()), json.loads(data)


LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"


def test_a_write_stamps_its_managers_entry_with_the_servers_time(api, core):
    api.add(fc.lease("n1", renewed_ago=300))
    before = api.get("leases", "n1", "kube-node-lease")
    _code, headers, _body = raw(core, "PATCH", LEASE, {"spec": {"renewTime": fc.micro_stamp(0)}},
                                user_agent="kubelet/v1.36.2 (linux/amd64)")
    after = api.get("leases", "n1", "kube-node-lease")
    kubelet = [e for e in after["metadata"]["managedFields"] if e["manager"] == "kubelet"]
    assert len(kubelet) == 1 and kubelet[0]["operation"] == "Update"
    server_now = email.utils.parsedate_to_datetime(headers["Date"])
    stamped = datetime.fromisoformat(kubelet[0]["time"].replace("Z", "+00:00"))
    assert abs((stamped - server_now).total_seconds()) <= 1
    assert after["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]


def test_a_write_that_changes_nothing_keeps_resource_version_and_times(api, core):
    api.add(fc.lease("n1", renewed_ago=300))
    before = api.get("leases", "n1", "kube-node-lease")
    raw(core, "PATCH", LEASE, {"spec": {"holderIdentity": before["spec"]["holderIdentity"]}})
    assert api.get("leases", "n1", "kube-node-lease") == before


def test_the_status_subresource_writes_only_status_and_stamps_a_status_entry(api, core):
    api.add(fc.node("n1", ready="True", since=600))
    raw(core, "PATCH", "/api/v1/nodes/n1/status", {"metadata": {"labels": {"x": "y"}}, "status": {
        "conditions": [{"type": "Ready", "status": "Unknown"}]}}, user_agent="kube-controller-manager/v1.36.2")
    node = api.get("nodes", "n1")
    assert "x" not in node["metadata"]["labels"], "a write to /status changes nothing but status"
    assert [c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"] == ["Unknown"]
    assert [e["manager"] for e in _entries(node, "status")][-1] == "kube-controller-manager"
    raw(core, "PATCH", "/api/v1/nodes/n1", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert [c["status"] for c in api.get("nodes", "n1")["status"]["conditions"] if c["type"] == "Ready"] \
        == ["Unknown"], "a write to the object ignores its status"


def test_the_date_header_can_be_stripped_as_a_proxy_would(api, core):
    api.add(fc.node("n1"))
    assert "Date" in raw(core, "GET", "/api/v1/nodes/n1")[1]
    api.omit_date_header = True
    assert "Date" not in raw(core, "GET", "/api/v1/nodes/n1")[1]


def test_objects_are_created_deleted_and_finalized_as_kube_apiserver_does(api, kubeconfig):
    """What kube-apiserver v1.36.2 answered to the same calls (tests/e2e/test_e2e_fixture_parity.py checks it on
    the real server): a created pod's status is dropped, a graceful delete marks it until now + the grace, a
    second delete only shortens the grace, finalizers hold anything, a VolumeAttachment waits for its attacher."""
    from lifecycle_parity import EXPECTED, lifecycle_facts

    from rwo_testkit.kube import Kube

    assert lifecycle_facts(Kube(Path(kubeconfig))) == EXPECTED


def test_a_deleted_attachment_stays_until_its_attacher_has_detached_it(api, kubeconfig):
    """The external-attacher's finalizer (external-attacher/<driver>, every character outside [a-zA-Z0-9-] made
    '-') holds a deleted VolumeAttachment until ControllerUnpublishVolume succeeded: attacher.detach() plays it,
    and records whether the node carried the out-of-service taint then."""
    from rwo_testkit import fake_cluster as fc
    from rwo_testkit.kube import Kube

    fc.dead_node(api, "dead", taints=[fc.SHUTDOWN, fc.OUT_OF_SERVICE])
    _pvc, _pv, va = fc.add_volume(api, "data", attached_to="dead")
    name = va["metadata"]["name"]
    assert va["metadata"]["finalizers"] == ["external-attacher/ebs-csi-aws-com"]
    kube = Kube(Path(kubeconfig))
    kube.delete(f"/apis/storage.k8s.io/v1/volumeattachments/{name}", {"preconditions": {"uid": va["metadata"]["uid"]}})
    held = api.get("volumeattachments", name)
    assert held["metadata"]["deletionTimestamp"] and held["metadata"]["deletionGracePeriodSeconds"] == 0
    assert api.attacher.detach("another") == [] and api.get("volumeattachments", name) is not None
    assert api.attacher.detach() == [name] and api.get("volumeattachments", name) is None
    assert api.attacher.unpublished == [(name, "dead", True)]
    assert api.attacher.detach() == []
