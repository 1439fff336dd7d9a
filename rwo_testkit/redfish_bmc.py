"""A real Redfish server for the tests: sushy-tools' emulator with its fake driver, HTTPS on 127.0.0.1.

`RedfishEmulator(systems)` starts `python -m sushy_tools.emulator.main` as a subprocess with a config file:
one fake ComputerSystem per (name, power state), its UUID the systemUUID of a fixture node of that name
(fake_cluster.machine_uuid), HTTP Basic authentication from a bcrypt htpasswd file, TLS
with a certificate from its own CA (control_plane.make_pki). The fake driver applies a ForceOff 1 to 11 s
after it is accepted, as real hardware takes time. `entry(name)` is a REDFISH_BMC_FILE entry for one
system; `power(name)` reads the state the emulator holds, the way an operator's tool would.

`SilentBmc` accepts TLS connections and never answers (a BMC that hangs); `SlowBmc` answers one byte at a
time (a BMC, or a proxy before one, that trickles). Both on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import bcrypt

from .control_plane import make_pki
from .fake_cluster import machine_uuid

USER, PASSWORD = "bmc-admin", "s3cret-bmc-password"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedfishEmulator:
    def __init__(self, systems: dict[str, str]) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="redfish-"))
        make_pki(self.folder)
        self.ca_file = str(self.folder / "ca.crt")
        self.ids = {name: machine_uuid(name) for name in systems}  # a node of that name's systemUUID
        self.port = _free_port()
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        (self.folder / "htpasswd").write_text(f"{USER}:{hashed}\n")
        fake = [{"uuid": self.ids[name], "name": name, "power_state": state, "nics": []}
                for name, state in systems.items()]
        (self.folder / "config.py").write_text(
            "SUSHY_EMULATOR_FAKE_DRIVER = True\n"
            f"SUSHY_EMULATOR_FAKE_SYSTEMS = {fake!r}\n"
            f"SUSHY_EMULATOR_AUTH_FILE = {str(self.folder / 'htpasswd')!r}\n"
            f"SUSHY_EMULATOR_STATE_DIR = {str(self.folder / 'state')!r}\n")
        self.process: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def endpoint(self, name: str) -> str:
        return f"{self.base}/redfish/v1/Systems/{self.ids[name]}"

    def entry(self, name: str, password: str = PASSWORD, ca: bool = True, *, uuid: str | None = None) -> dict:
        """A REDFISH_BMC_FILE entry for system `name`: its identity (uuid) is that system's, or `uuid`."""
        found = {"endpoint": self.endpoint(name), "username": USER, "password": password,
                 "uuid": uuid or self.ids[name]}
        if ca:
            found["ca"] = Path(self.ca_file).read_text()
        return found

    def _get(self, url: str) -> dict:
        auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {auth}"})
        context = ssl.create_default_context(cafile=self.ca_file)
        with urllib.request.urlopen(request, context=context, timeout=5) as answer:
            return json.loads(answer.read())

    def power(self, name: str) -> str:
        return self._get(self.endpoint(name))["PowerState"]

    def force_off(self, name: str) -> None:
        """Cut the machine's power through its BMC (ComputerSystem.Reset ForceOff), as an outage would."""
        auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        request = urllib.request.Request(
            f"{self.endpoint(name)}/Actions/ComputerSystem.Reset", data=json.dumps({"ResetType": "ForceOff"}).encode(),
            headers={"Authorization": f"Basic {auth}", "Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=self.ca_file), timeout=5):
            pass

    def __enter__(self) -> RedfishEmulator:
        log = open(self.folder / "emulator.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sushy_tools.emulator.main", "--config", str(self.folder / "config.py"),
             "-i", "127.0.0.1", "-p", str(self.port), "--ssl-certificate", str(self.folder / "server.crt"),
             "--ssl-key", str(self.folder / "server.key")],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        ends = time.monotonic() + 30
        while time.monotonic() < ends:
            if self.process.poll() is not None:
                raise RuntimeError(f"sushy-emulator exited: {(self.folder / 'emulator.log').read_text()[-2000:]}")
            try:
                self._get(f"{self.base}/redfish/v1/Systems")
                return self
            except (urllib.error.URLError, OSError, ValueError):
                time.sleep(0.2)
        self.__exit__()
        raise RuntimeError("sushy-emulator did not answer within 30 s")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class _RawTLS:
    """A TLS server on 127.0.0.1 whose answer to every request is `reply`, sent `trickle` s per byte, or never."""

    def __init__(self, reply: bytes | None, trickle: float = 0.0) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="bmc-"))
        make_pki(self.folder)
        self.ca_file = str(self.folder / "ca.crt")
        self.reply, self.trickle, self.closed, self.requests = reply, trickle, threading.Event(), 0
        self.request_lines: list[str] = []  # "POST /redfish/v1/Systems/1/Actions/...", as received
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(self.folder / "server.crt", self.folder / "server.key")

    def entry(self, uuid: str = "") -> dict:
        return {"endpoint": f"https://127.0.0.1:{self.port}/redfish/v1/Systems/1", "username": USER,
                "password": PASSWORD, "ca": Path(self.ca_file).read_text(), "uuid": uuid or machine_uuid("raw-bmc")}

    def _serve(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            with self.context.wrap_socket(conn, server_side=True) as tls:
                tls.settimeout(5)
                head = tls.recv(65536)
                self.requests += 1
                self.request_lines.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
                if self.reply is None:
                    self.closed.wait(60)
                    return
                for byte in self.reply:
                    if self.closed.is_set():
                        return
                    tls.sendall(bytes([byte]))
                    time.sleep(self.trickle)
        except (OSError, ssl.SSLError):
            pass

    def __enter__(self) -> _RawTLS:
        threading.Thread(target=self._serve, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed.set()
        self.sock.close()


def SilentBmc() -> _RawTLS:
    return _RawTLS(None)


def SlowBmc(power_state: str = "Off", trickle: float = 0.3) -> _RawTLS:
    body = json.dumps({"@odata.id": "/redfish/v1/Systems/1", "PowerState": power_state}).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    return _RawTLS(head + body, trickle)
