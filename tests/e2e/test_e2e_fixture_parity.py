"""The fixture API server keeps, marks and removes objects as kube-apiserver does (issue 37): the same calls on
both (tests/lifecycle_parity.py), the same outcome. Where they disagreed the fixture was kinder: a deleted
VolumeAttachment went at once though the external-attacher's finalizer holds it, a created pod kept the status
it was sent, and a graceful delete was stamped "now" instead of now plus the grace period."""

from __future__ import annotations

from pathlib import Path

import pytest
from lifecycle_parity import EXPECTED, lifecycle_facts

from rwo_testkit.fake_apiserver import FakeApiServer
from rwo_testkit.kube import Kube

pytestmark = pytest.mark.e2e


def test_the_fixture_creates_deletes_and_finalizes_as_kube_apiserver_does(cluster, tmp_path):
    real = lifecycle_facts(cluster.kube, "-parity")
    with FakeApiServer() as fake:
        mimic = lifecycle_facts(Kube(Path(fake.write_kubeconfig(str(tmp_path / "kubeconfig")))), "-parity")
    assert real == EXPECTED, "kube-apiserver answered otherwise than recorded in tests/lifecycle_parity.py"
    assert mimic == real
