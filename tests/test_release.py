"""One version and one license everywhere; release notes exist for the version in the code."""

from __future__ import annotations

import json
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


# --- releases an operator can verify and keep patched (issue 44) ---------------------------------------------

WORKFLOWS = ROOT / ".github" / "workflows"
SHA = re.compile(r"[0-9a-f]{40}")


def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def release_steps() -> list[dict]:
    return workflow("release.yml")["jobs"]["release"]["steps"]


def step_index(steps: list[dict], predicate) -> int:
    [index] = [i for i, step in enumerate(steps) if predicate(step)]
    return index


def test_the_release_waits_for_ci_on_the_tagged_commit():
    """The release job needs a job that runs ci.yml (.ci/run) in the same run, on the same commit."""
    jobs = workflow("release.yml")["jobs"]
    ci_jobs = [name for name, job in jobs.items() if job.get("uses") == "./.github/workflows/ci.yml"]
    assert ci_jobs and set(ci_jobs) <= set(jobs["release"]["needs"])
    triggers = workflow("ci.yml")[True]  # YAML 1.1 reads the key `on` as True
    assert "workflow_call" in triggers, "ci.yml can be called by the release"
    assert "bash .ci/run" in (WORKFLOWS / "ci.yml").read_text()


def test_every_action_is_pinned_by_commit():
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in yaml.safe_load(path.read_text())["jobs"].values():
            for step in job.get("steps", ()):
                if "uses" in step:
                    ref = step["uses"].partition("@")[2]
                    assert SHA.fullmatch(ref), f"{path.name}: {step['uses']}"


def test_helm_is_pinned_and_checked():
    job = workflow("release.yml")["jobs"]["release"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", job["env"]["HELM_VERSION"])
    assert re.fullmatch(r"[0-9a-f]{64}", job["env"]["HELM_SHA256"])
    steps = release_steps()
    install = step_index(steps, lambda s: "HELM_SHA256" in s.get("run", ""))
    assert "sha256sum --check --strict" in steps[install]["run"] and "$HELM_VERSION" in steps[install]["run"]
    assert install < step_index(steps, lambda s: "helm lint" in s.get("run", "")), "installed before use"


def test_a_vulnerability_scan_gates_the_push_the_signatures_and_the_chart():
    steps = release_steps()
    scans = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("aquasecurity/trivy-action@")]
    assert len(scans) == 2
    for i in scans:
        settings = steps[i]["with"]
        assert settings["severity"] == "HIGH,CRITICAL" and settings["ignore-unfixed"] is True
        assert str(settings["exit-code"]) == "1", "a finding fails the release"
        assert str(settings["cache"]) == "false", "a release restores no cache"
    push = step_index(steps, lambda s: s.get("with", {}).get("push") is True)
    scan_build = step_index(steps, lambda s: s.get("with", {}).get("load") is True)
    assert scan_build < scans[0] < push < scans[1], "scan before the push; the pushed image before signing"
    assert steps[scans[0]]["with"]["image-ref"] == steps[scan_build]["with"]["tags"]
    signs = [i for i, s in enumerate(steps) if "cosign sign" in s.get("run", "")]
    chart_push = step_index(steps, lambda s: "helm push" in s.get("run", ""))
    assert signs and min(signs + [chart_push]) > scans[1]


def test_every_artifact_has_a_signed_checksum_on_the_release():
    steps = release_steps()
    run = steps[step_index(steps, lambda s: "gh release create" in s.get("run", ""))]["run"]
    assets = re.search(r"assets=\((.*?)\)", run, re.S)[1].split()
    assert assets == ["dist/*.whl", "dist/kubectl-rwo_failover.tar.gz", "dist/rwo-failover.krew.yaml",
                      '"dist/rwo-failover-$VERSION.tgz"']
    assert 'sha256sum -- "${assets[@]#dist/}") > dist/SHA256SUMS' in run
    assert "cosign sign-blob --yes --bundle dist/SHA256SUMS.sigstore.json dist/SHA256SUMS" in run
    create = run[run.index("gh release create"):]
    assert '"${assets[@]}" dist/SHA256SUMS dist/SHA256SUMS.sigstore.json' in create
    assert run.index("cosign sign-blob") < run.index("gh release create")
    job = workflow("release.yml")["jobs"]["release"]
    assert job["permissions"]["id-token"] == "write"


def verify_section() -> str:
    return (ROOT / "docs" / "operations.md").read_text().split("## Verify a release", 1)[1].split("\n## ", 1)[0]


def test_the_operations_guide_shows_how_to_verify_each_signature():
    """The identity is the release workflow's path at the tag ref; the issuer is GitHub's OIDC."""
    text = verify_section()
    identity = re.search(r"^IDENTITY=(\S+)$", text, re.M)[1]
    assert identity == "https://github.com/rwo-failover/rwo-failover/.github/workflows/release.yml@refs/tags/$TAG"
    assert (WORKFLOWS / "release.yml").exists() and workflow("release.yml")[True]["push"]["tags"] == ["v*"]
    assert re.search(r"^ISSUER=https://token\.actions\.githubusercontent\.com$", text, re.M)
    commands = text.replace("\\\n", " ")
    verifies = re.findall(r"^cosign verify(?:-blob)? .*$", commands, re.M)
    assert len(verifies) == 3
    for command in verifies:
        assert '--certificate-identity "$IDENTITY"' in command and '--certificate-oidc-issuer "$ISSUER"' in command
    assert any("verify-blob SHA256SUMS --bundle SHA256SUMS.sigstore.json" in c for c in verifies)
    assert "sha256sum --check SHA256SUMS" in text
    assert "Helm 3.18 or" in text, "which Helm an @sha256 chart install needs"
    assert workflow("release.yml")["jobs"]["release"]["env"]["HELM_VERSION"] in text


def test_both_image_stages_are_debian_13_and_python_3_13_pinned_by_digest():
    """distroless python3-debian13 runs Debian's Python 3.13, so the wheels pip picks in the build stage must be
    CPython 3.13's; both bases are pinned by tag and digest."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM (\S+?):(\S+?)@(sha256:[0-9a-f]{64})(?: AS \w+)?$", dockerfile, re.M)
    assert [(image, tag) for image, tag, _ in froms] == [("python", "3.13-slim-trixie"),
                                                       ("gcr.io/distroless/python3-debian13", "nonroot")]
    label = re.search(r'org\.opencontainers\.image\.base\.name="([^"]+)"', dockerfile)[1]
    assert label == "gcr.io/distroless/python3-debian13:nonroot"
    assert 'ENTRYPOINT ["/usr/bin/python3",' in dockerfile


def test_renovate_keeps_the_base_images_the_actions_and_the_requirements_current():
    config = json.loads((ROOT / "renovate.json").read_text())
    assert {"dockerfile", "github-actions", "pip-compile"} <= set(config["enabledManagers"])
    assert "docker:pinDigests" in config["extends"] and "helpers:pinGitHubActionDigests" in config["extends"]

    def matched(manager: str) -> set[str]:
        patterns = [re.compile(p.strip("/")) for p in config[manager]["managerFilePatterns"]]
        files = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("**/*requirements*.txt")
                 if not {".venv", ".ci-venvs"} & set(p.relative_to(ROOT).parts)}
        return {f for f in files if any(p.search(f) for p in patterns)}

    compiled = {"requirements.txt", "requirements-dev.txt", ".ci/lint-requirements.txt"}
    assert matched("pip-compile") == compiled
    for name in compiled:
        assert "autogenerated by pip-compile" in (ROOT / name).read_text(), name
    assert matched("pip_requirements") == {".ci/checkov-requirements.txt"}
    # No rule moves the build stage's Python off the runtime's minor version.
    [python_rule] = [r for r in config["packageRules"] if r.get("matchPackageNames") == ["python"]]
    assert python_rule["enabled"] is False and set(python_rule["matchUpdateTypes"]) == {"minor", "major"}
