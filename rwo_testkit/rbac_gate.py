"""The RBAC of a rendered install, enforced by the fixture API server as the real authorizer would.

`enforce(api, docs)` adds a hook that answers 403 to every request the Roles and ClusterRoles in `docs` do not
grant the install's ServiceAccount: a RoleBinding grants only in its own namespace, a ClusterRoleBinding
everywhere; API group, resource, verb and resourceNames must all match. So a pass run with a render's env
under its own RBAC shows what that install would do on a cluster, before any cluster is involved.
"""

from __future__ import annotations

from .fake_apiserver import KINDS, FakeApiServer, Request, Response, _status_body

Grant = tuple[str | None, dict]  # (the RoleBinding's namespace, or None for cluster-wide; a rule)


def grants(docs: list[dict], namespace: str, account: str) -> list[Grant]:
    """Every rule bound to ServiceAccount `namespace/account` in `docs`."""
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d.get("rules") or []
             for d in docs if d["kind"] in ("Role", "ClusterRole")}
    subject = {"kind": "ServiceAccount", "name": account, "namespace": namespace}
    found: list[Grant] = []
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding") or subject not in binding["subjects"]:
            continue
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        ref = binding["roleRef"]
        role_namespace = scope if ref["kind"] == "Role" else None
        found += [(scope, rule) for rule in roles.get((ref["kind"], role_namespace, ref["name"]), [])]
    return found


def _group(resource: str) -> str:
    version = KINDS[resource].api_version if resource in KINDS else "v1"
    return version.split("/")[0] if "/" in version else ""


def allowed(found: list[Grant], req: Request) -> bool:
    for scope, rule in found:
        if scope is not None and (req.namespace != scope or not KINDS.get(req.resource, KINDS["pods"]).namespaced):
            continue
        if _group(req.resource) in rule.get("apiGroups", []) and req.resource in rule["resources"] \
                and req.verb in rule["verbs"] and (not rule.get("resourceNames") or req.name in rule["resourceNames"]):
            return True
    return False


def enforce(api: FakeApiServer, docs: list[dict], namespace: str = "rwo-failover", *,
            account: str = "rwo-failover") -> None:
    found = grants(docs, namespace, account)

    def hook(req: Request) -> Response | None:
        if req.verb == "version" or allowed(found, req):
            return None
        where = f' in the namespace "{req.namespace}"' if req.namespace else " at the cluster scope"
        message = (f'{req.resource} "{req.name}" is forbidden: User "system:serviceaccount:{namespace}:{account}" '
                   f'cannot {req.verb} resource "{req.resource}" in API group "{_group(req.resource)}"{where}')
        return Response(403, _status_body(403, "Forbidden", message), {"Content-Type": "application/json"})
    api.hooks.append(hook)
