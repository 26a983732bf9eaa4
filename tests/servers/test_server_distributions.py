"""Server distributions: install (or take from the machine's cache), manifest, integrity, archives, bad input."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from tuner.core import sandbox as sbx
from tuner.core.errors import SandboxError, ServerError, UsageError
from tuner.core.servers import build, distributions, tree

TREE_SERVERS = ("mysql-9.7", "mariadb-11.8")


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """An empty per-test INNOTIER_CACHE, so tests that install or damage trees never touch the machine's cache."""
    monkeypatch.setenv("INNOTIER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("name", TREE_SERVERS)
def test_installed_tree_has_a_manifest_matching_its_binary(name, installed_server):
    srv = installed_server(name)
    m = srv.manifest
    dist = distributions.get(name)
    assert m.kind == "tree" and m.suite == dist.suite and m.series == dist.series
    assert set(m.packages) == set(dist.packages) and all(v and v != "?" for v in m.packages.values())
    assert m.binary_sha256 == tree.sha256_file(srv.binary)
    assert m.version.startswith(dist.series + ".") and m.build_date and m.innotier_version
    srv.verify()
    # the server runs from the host through the tree's loader: same version as recorded
    out = srv.run([dist.binary, "--version"])
    assert out.returncode == 0 and m.version in out.stdout
    # apt's caches and lists and the docs were stripped
    for rel in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc"):
        p = srv.root / rel
        assert not p.exists() or not [f for f in p.iterdir() if f.name not in ("partial", "lock")], rel


def test_list_shows_installed_and_available(cli, installed_server):
    for name in TREE_SERVERS:
        installed_server(name)
    proc = cli("server", "list", "--json", check=True)
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == set(distributions.known_names())
    for name in TREE_SERVERS:
        assert rows[name]["state"] == "installed" and rows[name]["version"].startswith(name.split("-")[1])


def test_unknown_server_names_the_known_ones(cli, innotier_home):
    for args in (("server", "install", "mysql-8.0"), ("sandbox", "create", "x-unknown", "--server", "mysql-8.0")):
        proc = cli(*args)
        assert proc.returncode == UsageError.exit_code, proc.stderr
        assert "unknown server 'mysql-8.0'" in proc.stderr
        assert all(n in proc.stderr for n in distributions.known_names())
    assert not (innotier_home / "sandboxes" / "x-unknown").exists()


def test_not_installed_says_how_to_install(private_cache):
    with pytest.raises(UsageError, match="innotier server install mariadb-11.8"):
        tree.installed("mariadb-11.8")


def test_tree_whose_binary_was_replaced_is_refused(mysql_9_7, private_cache, innotier_home):
    """A copy of the real manifest over a tree whose mysqld is something else: refused before anything runs."""
    real = mysql_9_7
    fake = private_cache / "servers" / "mysql-9.7"
    (fake / "tree" / "usr" / "sbin").mkdir(parents=True)
    shutil.copy(real.path / tree.MANIFEST, fake / tree.MANIFEST)
    (fake / "tree" / "usr" / "sbin" / "mysqld").write_bytes(b"#!/bin/sh\necho not mysqld\n")
    with pytest.raises(SandboxError, match="does not match its manifest"):
        tree.installed("mysql-9.7")
    with pytest.raises(SandboxError, match="server remove mysql-9.7"):
        sbx.create("replaced", server="mysql-9.7")
    assert not (innotier_home / "sandboxes" / "replaced").exists()


def test_a_binary_rewritten_after_verification_is_refused(private_cache):
    """The verified stamp (stat of the hashed binary) does not hide a later change of the same size."""
    path = private_cache / "servers" / "mariadb-10.11"
    path.mkdir(parents=True)
    binary = path / "mariadbd"
    binary.write_bytes(b"A" * 4096)
    manifest = build.Manifest(name="mariadb-10.11", flavor="mariadb", series="10.11", kind="host", suite=None,
                              mirror=None, packages={}, binary=str(binary), binary_sha256=tree.sha256_file(binary),
                              version_string="", version="10.11.0", build_date="", innotier_version="")
    srv = tree.InstalledServer(dist=distributions.get("mariadb-10.11"), path=path, manifest=manifest)
    srv.verify()
    assert (path / tree.VERIFIED).is_file()
    srv.verify()  # unchanged: the stamp matches
    binary.write_bytes(b"B" * 4096)
    with pytest.raises(SandboxError, match="does not match its manifest"):
        srv.verify()


def test_archive_that_no_longer_serves_the_series_is_named():
    dist = distributions.get("mysql-9.7")
    with pytest.raises(ServerError, match="no longer serves mysql-9.7.*--from-archive"):
        build._check_series(dist, "/usr/sbin/mysqld  Ver 9.8.0-1 for Linux on x86_64 ((Debian))", "9.8.0-1")
    assert str(build._check_series(dist, "mysqld  Ver 9.7.9-1 for Linux", "9.7.9-1")) == "9.7.9"  # same series: fine


def test_installing_again_verifies_the_tree_and_succeeds(mariadb_11_8, cli):
    plan = build.plan_install("mariadb-11.8")
    assert plan.already_installed and "already installed" in plan.render()
    srv = build.install(plan)
    assert srv.manifest.to_dict() == mariadb_11_8.manifest.to_dict()
    env = {"INNOTIER_CACHE": str(mariadb_11_8.path.parent.parent)}
    proc = cli("server", "install", "mariadb-11.8", env=env)
    assert proc.returncode == 0 and "already installed, verified: mariadb-11.8" in proc.stdout, proc.stderr


def test_installing_again_over_a_damaged_tree_says_how_to_reinstall(private_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("INNOTIER_CACHE", str(private_cache))
    dist = distributions.get("mariadb-10.11")
    path = private_cache / "servers" / dist.name
    path.mkdir(parents=True)
    binary = tmp_path / "mariadbd"
    binary.write_bytes(b"A" * 4096)
    manifest = tree.Manifest(name=dist.name, flavor="mariadb", series="10.11", kind="host", suite=None,
                             mirror=None, packages={}, binary=str(binary).lstrip("/"), binary_sha256="0" * 64,
                             version_string="", version="10.11.0", build_date="", innotier_version="")
    tree.write_manifest(path, manifest)
    with pytest.raises(SandboxError, match="does not match its manifest.*server remove mariadb-10.11"):
        build.install(build.plan_install("mariadb-10.11"))


def test_host_mariadb_is_registered(private_cache, cli):
    proc = cli("server", "install", "mariadb-10.11", env={"INNOTIER_CACHE": str(private_cache)})
    assert proc.returncode == 0, proc.stderr
    srv = tree.installed("mariadb-10.11")
    assert srv.root == tree.Path("/") and srv.launcher() == [] and srv.server_options() == {}
    assert srv.manifest.packages["mariadb-server"] and srv.version.series == "10.11"
    proc = cli("server", "remove", "mariadb-10.11", env={"INNOTIER_CACHE": str(private_cache)})
    assert proc.returncode == 0 and not (private_cache / "servers" / "mariadb-10.11").exists()


@pytest.mark.slow
def test_cache_archive_round_trip(mariadb_11_8, private_cache, tmp_path, monkeypatch):
    """export from the machine's cache, install --from-archive into an empty cache: verified, listed, runnable."""
    machine = mariadb_11_8
    monkeypatch.setenv("INNOTIER_CACHE", str(machine.path.parent.parent))
    archive = build.export("mariadb-11.8", tmp_path / "mariadb-11.8.tar.zst")
    monkeypatch.setenv("INNOTIER_CACHE", str(private_cache))
    srv = build.install_from_archive(archive)
    assert srv.manifest.to_dict() == machine.manifest.to_dict()
    srv.verify()
    assert srv.run([srv.dist.binary, "--version"]).returncode == 0
    assert [s.dist.name for s in tree.list_installed()] == ["mariadb-11.8"]
    with pytest.raises(UsageError, match="already installed"):
        build.install_from_archive(archive)


def test_bad_archive_is_refused_and_changes_nothing(private_cache, tmp_path):
    bogus = tmp_path / "x.tar.zst"
    bogus.write_bytes(b"not an archive")
    with pytest.raises(UsageError, match="not a readable .tar.zst"):
        build.install_from_archive(bogus)
    other = tmp_path / "other"
    (other / "etc").mkdir(parents=True)
    (other / "etc" / "passwd").write_text("x")
    wrong = tmp_path / "wrong.tar.zst"
    assert os.system(f"tar -C {other} --zstd -cf {wrong} etc") == 0
    with pytest.raises(UsageError, match="not a server cache archive"):
        build.install_from_archive(wrong)
    assert not (private_cache / "servers").exists() or not any((private_cache / "servers").iterdir())
