"""The import rule of docs/internals.md ("Layers"), checked on every module of the project.

kernel (tuner.core) <- domain (profiles, datadir_mover, exporters) <- application (tuner.cli, tpcc, sweep):
an import points down (or within its own room), never up, sideways only where the doc allows
(datadir_mover -> profiles), and no two modules import each other through any chain.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import layers

# Deferred imports of project modules that stay (each has a comment at the import saying why).
MAX_DEFERRED = 15


@pytest.fixture(scope="module")
def imports():
    return layers.collect()


def test_no_arrow_points_up_or_sideways(imports):
    bad = layers.violations(imports)
    assert not bad, "imports against the layer rule (docs/internals.md):\n" + "\n".join(bad)


def test_no_import_cycles(imports):
    loops = layers.cycles(layers.graph(imports))
    assert not loops, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in loops)


def test_deferred_project_imports_are_few_and_explained(imports):
    late = layers.deferred(imports)
    assert len(late) < MAX_DEFERRED, [f"{i.source}:{i.line}" for i in late]
    modules = layers.discover()
    for imp in late:
        line = modules[imp.source].read_text().split("\n")[imp.line - 1]
        assert "# deferred:" in line, f"{imp.source}:{imp.line} is deferred without a '# deferred: <reason>' comment"


def test_every_kind_of_import_is_seen(imports):
    """Top-level, deferred, relative and importlib-by-string imports all reach the graph."""
    edges = {(i.source, i.target, i.deferred) for i in imports}
    assert ("tuner.cli", "tuner.core.cliwiring", False) in edges                # from x import y
    assert ("tuner.tpcc.tpcc_run_cli", "exporters.live", True) in edges         # inside a function
    assert ("tuner.tpcc.adapters.sysbench_tpcc", "tuner.tpcc.adapters._common", False) in edges  # from pkg import mod


def _copy_project(tmp_path: Path) -> Path:
    for pkg in layers.PACKAGES:
        shutil.copytree(layers.ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.parametrize("module, planted", [
    # the kernel reaching up into a domain room, deferred inside a function
    ("tuner/core/units.py", "\n\ndef _planted():\n    from profiles.model import load_profile\n    return load_profile\n"),
    # a domain room reaching up into the application, by a relative-free absolute import at top level
    ("exporters/naming.py", "\nfrom tuner.sweep import plan as _planted_plan\n"),
    # the mover loading the workload by a string, as verify.py once did
    ("datadir_mover/move/copy/tree.py", "\n\ndef _planted():\n    import importlib\n"
                                        "    return importlib.import_module('tuner.tpcc.check')\n"),
    # sideways between domain rooms where the doc does not allow it (profiles -> datadir_mover)
    ("profiles/diff.py", "\nfrom datadir_mover.move import copy as _planted_copy\n"),
])
def test_checker_fails_on_a_planted_upward_import(tmp_path, module, planted):
    root = _copy_project(tmp_path)
    assert layers.violations(layers.collect(root)) == []
    with open(root / module, "a") as f:
        f.write(planted)
    bad = layers.violations(layers.collect(root))
    source = module[:-3].replace("/", ".")
    assert len(bad) == 1 and bad[0].startswith(source + ":"), bad


def test_checker_resolves_relative_imports_and_finds_cycles(tmp_path):
    root = _copy_project(tmp_path)
    # a relative import in the kernel that closes a cycle: units -> errors -> units
    with open(root / "tuner/core/errors.py", "a") as f:
        f.write("\n\ndef _planted():\n    from . import units\n    return units\n")
    with open(root / "tuner/core/units.py", "a") as f:
        f.write("\nfrom .errors import UsageError as _PlantedUsageError\n")
    imports = layers.collect(root)
    assert ("tuner.core.errors", "tuner.core.units", True) in {(i.source, i.target, i.deferred) for i in imports}
    assert ["tuner.core.errors", "tuner.core.units"] in layers.cycles(layers.graph(imports))


def test_cycle_finder_on_a_synthetic_graph():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert layers.cycles(edges) == [["a", "b", "c"], ["d", "e"]]
    assert layers.cycles({"a": {"b"}, "b": set()}) == []
