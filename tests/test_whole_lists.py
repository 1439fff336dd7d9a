"""Lists at resourceVersion 0, which kube-apiserver answers whole whatever their limit (v1.36.2, measured): one
over 16 MiB is left unread and made again without a resourceVersion, paginated (kube/lists.py). Over HTTP
against the fixture API server, which answers the same way. A pass's own lists are consistent (issue 36); these
are the lists that still ask the watch cache (consistent=False: the watch cache's own relists, say)."""

from __future__ import annotations

import gc
import tracemalloc

from rwo_failover import settings as config
from rwo_failover.kube import Api, load_api_client
from rwo_failover.model import Node, Pod, Reader
from rwo_testkit import fake_cluster as fc
from rwo_testkit.managed_fields import bulky, hostile_entry

PADDING = hostile_entry(bulky(1_400_000), manager="node-labeller")


def padded(obj: dict) -> dict:
    obj["metadata"]["managedFields"] = obj["metadata"].get("managedFields", []) + [PADDING]
    return obj


def new_api(kubeconfig: str) -> Api:
    _args, settings = config.load(["--once"], {"KUBECONFIG": kubeconfig})
    return Api(load_api_client(settings), settings)


def test_an_answer_left_unread_past_16_mib_is_not_kept_alive(api, kubeconfig):
    """The bytes read before an answer is found too large are dropped with it. They were kept by the exception's
    traceback, which tenacity's retry state holds in a reference cycle, until the cyclic collector ran: 16 MiB
    for each answer left, 48 MiB at once for one list (found by an attack on the whole-list fallback)."""
    for i in range(13):
        api.add(padded(fc.node(f"n{i:02d}")))
    reader, client = Reader(), new_api(kubeconfig)
    gc.collect()
    gc.disable()
    try:
        tracemalloc.start()
        nodes = reader.each(client.list_nodes(reader.parse("node", Node.from_json), consistent=False))
        held, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        gc.enable()
    assert len(nodes) == 13
    assert held < 8 << 20, f"{held / 2**20:.1f} MiB still held once the list is done"


def test_a_fallback_is_remembered_for_the_same_list_only(api, kubeconfig):
    """Pods listed by namespace share their query; only the path tells them apart. One tenant's namespace too
    large whole made every namespace's pod list skip the watch cache (found by an attack)."""
    for i in range(13):
        api.add(padded(fc.pod(f"big-{i}", "n1", namespace="tenant-a")))
    api.add(fc.pod("small-0", "n1", namespace="team-b"))
    client, reader = new_api(kubeconfig), Reader()
    convert = reader.parse("pod", Pod.from_json)
    assert len(reader.each(client.list_pods_in("tenant-a", convert, consistent=False))) == 13
    assert len(reader.each(client.list_pods_in("team-b", convert, consistent=False))) == 1
    asked = [(r.namespace, r.query.get("resourceVersion", "")) for r in api.requests
             if r.verb == "list" and r.resource == "pods"]
    assert asked[-1] == ("team-b", "0"), asked


def test_each_pass_asks_the_watch_cache_first_again(api, kubeconfig):
    """A list found too large whole is paginated for the rest of that pass only: a later pass (its own Api) asks
    the watch cache first again, so the list stays served from it when it is small again, or when etcd cannot
    answer a paginated one (found by an attack: a fallback remembered for the process outlived its cause)."""
    for i in range(13):
        api.add(padded(fc.pod(f"big-{i}", "n1")))
    convert = Reader().parse("pod", Pod.from_json)
    _args, settings = config.load(["--once"], {"KUBECONFIG": kubeconfig})
    shared = load_api_client(settings)  # one per process, as run/cli.py makes it; an Api per pass
    first = Api(shared, settings)
    first.list_pods_on("n1", convert, consistent=False)
    first.list_pods_on("n1", convert, consistent=False)
    for i in range(13):
        api.remove("pods", f"big-{i}", "default")
    Api(shared, settings).list_pods_on("n1", convert, consistent=False)
    asked = [r.query.get("resourceVersion", "") for r in api.requests if r.verb == "list" and r.resource == "pods"]
    assert asked[0] == "0" and asked[-1] == "0" and asked.count("0") == 2, asked
