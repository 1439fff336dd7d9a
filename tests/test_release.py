"""One version and one license everywhere; release notes exist for the version in the code."""

from __future__ import annotations

import re
import tomllib

import yaml
from conftest import ROOT

from rwo_failover import __version__


def test_one_version_everywhere():
    chart = yaml.safe_load((ROOT / "charts/rwo-failover/Chart.yaml").read_text())
    dockerfile = (ROOT / "Dockerfile").read_text()
    sources = [(ROOT / name).read_text() for name in ("deploy/base/cronjob.yaml", "deploy/ha/deployment.yaml")]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert chart["appVersion"] == __version__
    assert re.search(r'org\.opencontainers\.image\.version="([^"]+)"', dockerfile)[1] == __version__
    # The kustomize sources name the version beside the digest (deploy/components/image replaces both).
    for source in sources:
        assert re.findall(r"image: registry\.example\.com/rwo-failover:([^@\s]+)@", source) == [__version__]
    assert re.findall(r"^## (\S+)", changelog, re.M)[0] == __version__, "the newest release notes come first"


def test_one_license_everywhere():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in (ROOT / "Dockerfile").read_text()
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}
    assert yaml.safe_load((ROOT / "charts/rwo-failover/Chart.yaml").read_text())["annotations"]["licenses"] == \
        "Apache-2.0"


def test_the_release_notes_the_operations_guide_points_at_exist():
    assert "CHANGELOG.md" in (ROOT / "docs" / "operations.md").read_text()
