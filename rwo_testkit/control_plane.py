"""A real Kubernetes control plane on loopback, for the end-to-end tier (like envtest in the Go world).

It runs etcd, kube-apiserver (the Node and RBAC authorizers, the NodeRestriction admission plugin, static-token,
ServiceAccount-token and client-certificate auth), kube-controller-manager
(every controller, a short node-monitor grace) and kube-scheduler in a temporary folder, on free loopback
ports, and stops exactly the processes it started. There is no kubelet: `node_sim` plays it, with
the admin token, or with a node's own kubelet credential (`node_kubeconfig`: a client certificate for
`system:node:NAME` in `system:nodes`, as the kubelet's TLS bootstrap gets one), which the Node authorizer and
NodeRestriction judge as they judge a real kubelet.

Binaries come from one place: the folder named by KUBE_ASSETS (kube-apiserver, kube-controller-manager,
kube-scheduler, and optionally etcd). Without it, the archive in ../shared/k8s beside the repository is
unpacked once into a cache folder, after its SHA256 is checked. etcd comes from KUBE_ASSETS or PATH
(Debian's etcd-server). `find_assets` says what is missing, in one line, when anything is.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import ssl
import subprocess
import tarfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ARCHIVE = "k8s-control-plane-v1.36.2-linux-amd64.tar.xz"
ADMIN_TOKEN = "e2e-admin-token"
NODE_MONITOR_GRACE_SECONDS = 20  # the upstream default is 50 s; see docs/failover.md for what that changes


class AssetsMissing(Exception):
    """What is missing, and how to provide it, in one line."""


@dataclass(frozen=True)
class Assets:
    folder: Path
    etcd: Path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _shared_archive(repo: Path) -> Path:
    folder = repo.parent / "shared" / "k8s"
    if not (folder / ARCHIVE).exists():
        raise AssetsMissing(f"no Kubernetes binaries: set KUBE_ASSETS to a folder with {', '.join(BINARIES)} "
                            f"(none found at {folder / ARCHIVE} either)")
    return folder


def _unpack_once(shared: Path) -> Path:
    """Unpack the shared archive into a cache folder named by its checksum, checking every SHA256."""
    sums = dict(reversed(line.split()) for line in (shared / "SHA256SUMS").read_text().splitlines() if line.strip())
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "rwo-failover" / \
        f"k8s-{sums[ARCHIVE][:16]}"
    if all((cache / name).exists() for name in BINARIES):
        return cache
    if _sha256(shared / ARCHIVE) != sums[ARCHIVE]:
        raise AssetsMissing(f"{shared / ARCHIVE} does not match its SHA256 in SHA256SUMS; refusing to run it")
    partial = cache.with_name(cache.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tarfile.open(shared / ARCHIVE) as archive:
        archive.extractall(partial, filter="data")
    for name in BINARIES:
        found = next(partial.rglob(name))
        if _sha256(found) != sums[name]:
            raise AssetsMissing(f"{name} from {ARCHIVE} does not match its SHA256; refusing to run it")
        found.chmod(0o755)
        found.rename(partial / name)
    shutil.rmtree(cache, ignore_errors=True)
    partial.rename(cache)
    return cache


def find_assets(repo: Path) -> Assets:
    """The binaries to run, or AssetsMissing naming what is missing and how to provide it."""
    named = os.environ.get("KUBE_ASSETS")
    folder = Path(named) if named else _unpack_once(_shared_archive(repo))
    missing = [name for name in BINARIES if not (folder / name).exists()]
    if missing:
        raise AssetsMissing(f"KUBE_ASSETS={folder} lacks {', '.join(missing)}")
    etcd = folder / "etcd" if (folder / "etcd").exists() else shutil.which("etcd")
    if not etcd:
        raise AssetsMissing("no etcd: `apt-get install etcd-server` (Debian), or put etcd in KUBE_ASSETS")
    return Assets(folder, Path(etcd))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(folder: Path) -> None:
    """A CA, a serving certificate for 127.0.0.1 and localhost, and the ServiceAccount signing key pair."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
             "-subj", "/CN=rwo-failover-e2e-ca", cwd=folder)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=kube-apiserver", cwd=folder)
    (folder / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=folder)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=folder)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=folder)


def node_certificate(pki: Path, name: str) -> tuple[Path, Path]:
    """A kubelet's client certificate and key for node `name`, signed by the CA in `pki`: CN=system:node:NAME,
    O=system:nodes, the identity the Node authorizer and NodeRestriction recognise (what the CSR signer
    kubernetes.io/kube-apiserver-client-kubelet issues to a kubelet)."""
    stem = f"node-{name}"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{stem}.key", "-out", f"{stem}.csr",
             "-subj", f"/O=system:nodes/CN=system:node:{name}", cwd=pki)
    (pki / f"{stem}.ext").write_text("keyUsage=critical,digitalSignature,keyEncipherment\n"
                                     "extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{stem}.crt", "-days", "2", "-extfile", f"{stem}.ext", cwd=pki)
    return pki / f"{stem}.crt", pki / f"{stem}.key"


class ControlPlane:
    """`with ControlPlane(assets, workdir) as cp:`; `cp.kubeconfig` is an admin kubeconfig."""

    def __init__(self, assets: Assets, workdir: Path, node_monitor_grace: int = NODE_MONITOR_GRACE_SECONDS, *,
                 apiserver_args: tuple[str, ...] = (), controller_manager_args: tuple[str, ...] = ()) -> None:
        self.assets, self.workdir = assets, workdir
        self.node_monitor_grace, self.apiserver_args = node_monitor_grace, apiserver_args
        self.controller_manager_args = controller_manager_args
        self.processes: list[subprocess.Popen] = []
        self.port = 0
        self.kubeconfig = workdir / "admin.kubeconfig"
        self._apiserver: tuple[subprocess.Popen, list] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, argv: list) -> subprocess.Popen:
        log = (self.workdir / f"{name}.log").open("ab")
        proc = subprocess.Popen([str(a) for a in argv], stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                start_new_session=True)
        self.processes.append(proc)
        return proc

    def start(self) -> None:
        pki = self.workdir / "pki"
        make_pki(pki)
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self._spawn("etcd", [self.assets.etcd, "--data-dir", self.workdir / "etcd", "--name", "e2e",
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-cluster", f"e2e=http://127.0.0.1:{peer_port}",
                             "--unsafe-no-fsync"])
        self._wait(f"http://127.0.0.1:{etcd_port}/health", "etcd", secure=False)
        (self.workdir / "tokens.csv").write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
        argv: list = [
            self.assets.folder / "kube-apiserver", "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", self.port,
            "--tls-cert-file", pki / "server.crt", "--tls-private-key-file", pki / "server.key",
            "--client-ca-file", pki / "ca.crt", "--token-auth-file", self.workdir / "tokens.csv",
            "--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", pki / "sa.pub", "--service-account-signing-key-file", pki / "sa.key",
            "--service-cluster-ip-range", "10.0.0.0/24", "--endpoint-reconciler-type", "none",
            "--allow-privileged=true", "--profiling=false", *self.apiserver_args]
        self._apiserver = self._spawn("kube-apiserver", argv), argv
        self._wait(f"{self.url}/readyz", "kube-apiserver")
        self._write_kubeconfig(self.kubeconfig, {"token": ADMIN_TOKEN})
        kc = self.kubeconfig
        self._spawn("kube-controller-manager", [
            self.assets.folder / "kube-controller-manager", "--kubeconfig", kc, "--authentication-kubeconfig", kc,
            "--authorization-kubeconfig", kc, "--bind-address", "127.0.0.1", "--secure-port", free_port(),
            "--controllers", "*", "--leader-elect=false", "--use-service-account-credentials=false",
            "--service-account-private-key-file", pki / "sa.key", "--root-ca-file", pki / "ca.crt",
            "--node-monitor-grace-period", f"{self.node_monitor_grace}s", "--node-monitor-period", "2s",
            *self.controller_manager_args])
        self._spawn("kube-scheduler", [
            self.assets.folder / "kube-scheduler", "--kubeconfig", kc, "--authentication-kubeconfig", kc,
            "--authorization-kubeconfig", kc, "--bind-address", "127.0.0.1", "--secure-port", free_port(),
            "--leader-elect=false"])

    def restart_apiserver(self) -> float:
        """Stop kube-apiserver (SIGTERM, as a rollout does) and start it again on the same port; the seconds
        it was unavailable. Every watch on it breaks; its watch cache starts again from etcd."""
        assert self._apiserver is not None
        proc, argv = self._apiserver
        began = time.monotonic()
        proc.terminate()
        try:  # as the kubelet stops a static pod: SIGTERM, then SIGKILL after the 30 s grace period
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self.processes.remove(proc)
        self._apiserver = self._spawn("kube-apiserver", argv), argv
        self._wait(f"{self.url}/readyz", "kube-apiserver")
        return time.monotonic() - began

    def _wait(self, url: str, what: str, secure: bool = True, *, timeout: float = 90) -> None:
        context = ssl.create_default_context(cafile=str(self.workdir / "pki" / "ca.crt")) if secure else None
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.processes):
                raise RuntimeError(f"{what} exited early; see {self.workdir}/*.log")
            try:
                with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                    if answer.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{what} not ready within {timeout:.0f}s; see {self.workdir}/{what}.log")

    def _write_kubeconfig(self, path: Path, user: dict) -> Path:
        cluster = {"server": self.url, "certificate-authority": str(self.workdir / "pki" / "ca.crt")}
        config = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
                  "clusters": [{"name": "e2e", "cluster": cluster}],
                  "users": [{"name": "e2e", "user": user}],
                  "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}]}
        path.write_text(json.dumps(config))
        return path

    def kubeconfig_for(self, token: str, name: str) -> Path:
        """A kubeconfig that authenticates with `token` (a ServiceAccount's, say): RBAC judges every call."""
        return self._write_kubeconfig(self.workdir / f"{name}.kubeconfig", {"token": token})

    def node_kubeconfig(self, node: str) -> Path:
        """A kubeconfig for node `node`'s own kubelet: its client certificate (node_certificate), so the Node
        authorizer and the NodeRestriction admission plugin judge every call as they judge a real kubelet's."""
        cert, key = node_certificate(self.workdir / "pki", node)
        return self._write_kubeconfig(self.workdir / f"node-{node}.kubeconfig",
                                      {"client-certificate": str(cert), "client-key": str(key)})

    def stop(self) -> None:
        """Stop exactly the processes this object started, newest first."""
        for proc in reversed(self.processes):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.processes):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.processes.clear()

    def log_tail(self, name: str, lines: int = 40) -> str | None:
        path = self.workdir / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else None
