"""Import-rule checker: which way an import may point, and no cycles.

Run it directly to print the violations: ``python tests/layers.py [CHECKOUT]``.

Floors (docs/internals.md, "Layers"):
  application  tuner (cli, tpcc, sweep, *_cli)        may import everything
  domain       profiles, datadir_mover, exporters     kernel, own room, ALLOWED_SIDEWAYS
  kernel       tuner.core                             kernel only

Every import is counted: top level and inside functions, ``import x``,
``from x import y`` (y resolved to a submodule when it is one), relative
imports, and ``importlib.import_module("literal")``.
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tuner", "profiles", "datadir_mover", "exporters")
KERNEL, DOMAIN, APPLICATION = 0, 1, 2
FLOOR_NAMES = {KERNEL: "kernel", DOMAIN: "domain", APPLICATION: "application"}
DOMAIN_ROOMS = ("profiles", "datadir_mover", "exporters")
# Sideways arrows between domain rooms that docs/internals.md allows.
ALLOWED_SIDEWAYS = {("datadir_mover", "profiles")}


@dataclass(frozen=True)
class Import:
    source: str       # importing module
    target: str       # imported project module
    line: int
    deferred: bool    # inside a function body


def floor(module: str) -> int:
    if module == "tuner.core" or module.startswith("tuner.core."):
        return KERNEL
    if room(module) in DOMAIN_ROOMS:
        return DOMAIN
    return APPLICATION


def room(module: str) -> str:
    return module.split(".", 1)[0]


def discover(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> file, for every module of the project packages."""
    modules: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve_relative(module: str, is_pkg: bool, level: int, name: str | None) -> str:
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _project_target(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest project module that ``name`` names (or None if not ours)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, path: Path, modules: dict[str, Path]):
        self.module, self.path, self.modules = module, path, modules
        self.depth = 0
        self.found: list[Import] = []

    def _add(self, name: str, line: int) -> None:
        target = _project_target(name, self.modules)
        if target is not None and target != self.module:
            self.found.append(Import(self.module, target, line, self.depth > 0))

    def _function(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = _resolve_relative(self.module, _is_package(self.path), node.level, node.module)
        else:
            base = node.module or ""
        for alias in node.names:
            sub = f"{base}.{alias.name}" if base else alias.name
            self._add(sub if sub in self.modules else base, node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if (name == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            self._add(node.args[0].value, node.lineno)
        self.generic_visit(node)


def collect(root: Path = ROOT) -> list[Import]:
    modules = discover(root)
    imports: list[Import] = []
    for module, path in modules.items():
        visitor = _Visitor(module, path, modules)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        imports.extend(visitor.found)
    return imports


def allowed(source: str, target: str) -> bool:
    src, dst = floor(source), floor(target)
    if src == APPLICATION:
        return True
    if src == KERNEL:
        return dst == KERNEL
    # domain
    if dst == KERNEL or room(source) == room(target):
        return True
    return dst == DOMAIN and (room(source), room(target)) in ALLOWED_SIDEWAYS


def violations(imports: list[Import]) -> list[str]:
    out = []
    for imp in imports:
        if not allowed(imp.source, imp.target):
            where = "deferred " if imp.deferred else ""
            out.append(f"{imp.source}:{imp.line} {where}imports {imp.target} "
                       f"({FLOOR_NAMES[floor(imp.source)]} -> {FLOOR_NAMES[floor(imp.target)]})")
    return sorted(set(out))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strong(v)
    return sorted(result)


def graph(imports: list[Import]) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for imp in imports:
        edges.setdefault(imp.source, set()).add(imp.target)
    return edges


def deferred(imports: list[Import]) -> list[Import]:
    """Deferred import statements (one per statement, not per imported name)."""
    seen: dict[tuple[str, int], Import] = {}
    for imp in imports:
        if imp.deferred:
            seen.setdefault((imp.source, imp.line), imp)
    return list(seen.values())


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve() if argv else ROOT
    imports = collect(root)
    bad = violations(imports)
    loops = cycles(graph(imports))
    for line in bad:
        print("layer:", line)
    for component in loops:
        print("cycle:", " <-> ".join(component))
    for imp in deferred(imports):
        print(f"deferred: {imp.source}:{imp.line} imports {imp.target}")
    print(f"{len(imports)} project imports, {len(deferred(imports))} deferred, "
          f"{len(bad)} layer violations, {len(loops)} cycles")
    return 1 if bad or loops else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
