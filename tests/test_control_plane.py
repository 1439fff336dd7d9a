"""How the e2e tier finds its binaries, and what it says when it cannot (no control plane is started here)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import tarfile

import pytest

from rwo_testkit.control_plane import ARCHIVE, BINARIES, AssetsMissing, find_assets


def test_a_kube_assets_folder_missing_binaries_names_them(tmp_path, monkeypatch):
    (tmp_path / "kube-apiserver").write_text("")
    monkeypatch.setenv("KUBE_ASSETS", str(tmp_path))
    with pytest.raises(AssetsMissing, match="lacks kube-controller-manager, kube-scheduler"):
        find_assets(tmp_path / "repo")


def test_no_etcd_says_how_to_get_it(tmp_path, monkeypatch):
    for name in BINARIES:
        (tmp_path / name).write_text("")
    monkeypatch.setenv("KUBE_ASSETS", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(AssetsMissing, match="apt-get install etcd-server"):
        find_assets(tmp_path / "repo")


def test_without_kube_assets_or_the_shared_archive_it_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBE_ASSETS", raising=False)
    with pytest.raises(AssetsMissing, match="set KUBE_ASSETS"):
        find_assets(tmp_path / "repo")


def shared_archive(tmp_path, tamper: bool) -> None:
    folder = tmp_path / "shared" / "k8s"
    folder.mkdir(parents=True)
    blob = io.BytesIO()
    with tarfile.open(fileobj=blob, mode="w:xz") as archive:
        for name in BINARIES:
            data = f"#!/bin/sh\necho {name}\n".encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    (folder / ARCHIVE).write_bytes(blob.getvalue())
    sums = {name: hashlib.sha256(f"#!/bin/sh\necho {name}\n".encode()).hexdigest() for name in BINARIES}
    sums[ARCHIVE] = hashlib.sha256(blob.getvalue() + (b"x" if tamper else b"")).hexdigest()
    (folder / "SHA256SUMS").write_text("".join(f"{digest}  {name}\n" for name, digest in sums.items()))


def test_the_shared_archive_is_checked_and_unpacked_once(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBE_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    shared_archive(tmp_path, tamper=False)
    try:
        find_assets(tmp_path / "repo")
    except AssetsMissing as err:  # no etcd on this machine: the unpacking is still checked below
        assert "etcd" in str(err)
    folder = next((tmp_path / "cache" / "rwo-failover").iterdir())
    assert sorted(p.name for p in folder.iterdir()) == sorted(BINARIES)
    stamp = (folder / "kube-apiserver").stat().st_mtime_ns
    with contextlib.suppress(AssetsMissing):
        find_assets(tmp_path / "repo")
    assert (folder / "kube-apiserver").stat().st_mtime_ns == stamp, "unpacked once"


def test_a_tampered_archive_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBE_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shared_archive(tmp_path, tamper=True)
    with pytest.raises(AssetsMissing, match="does not match its SHA256"):
        find_assets(tmp_path / "repo")
