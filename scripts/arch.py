"""The architecture figures of the product code: what ``scripts/dev arch`` prints.

A maintainer (or a review) reads the shape of the house from these, not from a feeling:
files per folder, each folder's and each package's share of the product's lines, the
import arrows that run back up against the import-linter layers in ``pyproject.toml``,
the import cycles between modules (those closed only by ``TYPE_CHECKING`` imports apart),
the longest functions, and the duplicate pairs when the ``duplicates`` tool is installed.

The product is the ``root_packages`` of ``[tool.importlinter]``; tests, bench and scripts
are not counted. Lines are physical lines of ``.py`` files. The import graph is grimp's
(import-linter's own graph builder), built twice: with the imports under ``if
TYPE_CHECKING:`` and without them. Stdlib and grimp only, so it runs from the dev venv.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess  # noqa: TID251 (runs the duplicates tool, a developer's command)
import sys
import tempfile
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grimp

ROOT = Path(__file__).resolve().parents[1]
LONGEST = 10
PACKAGE_SHARE_LIMIT = 0.30  # docs/architecture.md "Measuring the shape": no package over it
DUPLICATES_S = 60


@dataclass(frozen=True, slots=True)
class Module:
    """One product module: its dotted name, its file and its physical lines."""

    name: str
    path: Path
    lines: int


@dataclass(frozen=True, slots=True)
class Folder:
    """One package folder and the modules directly in it (its own, not its subpackages')."""

    name: str
    modules: tuple[Module, ...]

    @property
    def lines(self) -> int:
        """The lines of its own modules."""
        return sum(module.lines for module in self.modules)

    @property
    def module_count(self) -> int:
        """Its own modules, ``__init__`` not counted."""
        return sum(1 for module in self.modules if module.path.name != "__init__.py")


@dataclass(frozen=True, slots=True)
class Layers:
    """One import-linter ``layers`` contract: layer groups top to bottom, each of siblings."""

    name: str
    groups: tuple[tuple[str, ...], ...]
    independent: tuple[bool, ...]  # per group: siblings joined by "|" may not import each other


@dataclass(frozen=True, slots=True)
class Arrow:
    """A direct import from ``importer`` to ``imported``, with where it is written."""

    importer: str
    imported: str
    line: int
    type_only: bool
    sideways: bool  # between independent siblings of one layer, not up


@dataclass(frozen=True, slots=True)
class Function:
    """A function or method: where it starts and how many lines its body spans."""

    where: str
    qualname: str
    lines: int


# -- reading the tree -------------------------------------------------------------------
def importlinter_config(root: Path) -> dict[str, Any]:
    """``[tool.importlinter]`` of ``root/pyproject.toml``."""
    with (root / "pyproject.toml").open("rb") as file:
        config: dict[str, Any] = tomllib.load(file)["tool"]["importlinter"]
    return config


def product_packages(root: Path) -> tuple[str, ...]:
    """The top-level packages import-linter checks: the product."""
    return tuple(str(name) for name in importlinter_config(root)["root_packages"])


def count_lines(path: Path) -> int:
    """Physical lines of one file."""
    return len(path.read_text(encoding="utf-8").splitlines())


def module_name(root: Path, path: Path) -> str:
    """``daemon/rig/poller.py`` -> ``daemon.rig.poller``; a package's ``__init__`` is itself."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def folders(root: Path, packages: Sequence[str]) -> list[Folder]:
    """Every package folder of the product with its own modules, in path order."""
    found: list[Folder] = []
    for package in packages:
        for directory in sorted({p.parent for p in (root / package).rglob("*.py")}):
            if "__pycache__" in directory.parts:
                continue
            modules = tuple(
                Module(module_name(root, path), path, count_lines(path))
                for path in sorted(directory.glob("*.py"))
            )
            name = ".".join(directory.relative_to(root).parts)
            found.append(Folder(name, modules))
    return found


# -- the import graph -------------------------------------------------------------------
def layer_contracts(root: Path) -> list[Layers]:
    """The ``layers`` contracts, their layer names made absolute (containers expanded)."""
    found: list[Layers] = []
    for contract in importlinter_config(root).get("contracts", []):
        if contract.get("type") != "layers":
            continue
        containers = contract.get("containers") or [""]
        for container in containers:
            prefix = f"{container}." if container else ""
            groups: list[tuple[str, ...]] = []
            independent: list[bool] = []
            for layer in contract["layers"]:
                separator = ":" if ":" in layer else "|"
                groups.append(tuple(prefix + part.strip() for part in layer.split(separator)))
                independent.append(separator == "|")
            found.append(Layers(str(contract["name"]), tuple(groups), tuple(independent)))
    return found


def _within(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def _place(module: str, layers: Layers) -> tuple[int, str] | None:
    for index, group in enumerate(layers.groups):
        for layer in group:
            if _within(module, layer):
                return index, layer
    return None


def direct_imports(graph: grimp.ImportGraph) -> set[tuple[str, str]]:
    """Every direct import between two modules of the graph."""
    return {
        (importer, imported)
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
    }


def _line(graph: grimp.ImportGraph, importer: str, imported: str) -> int:
    details = graph.get_import_details(importer=importer, imported=imported)
    return min((int(d["line_number"]) for d in details), default=0)


def arrows_against(
    full: grimp.ImportGraph, runtime_edges: set[tuple[str, str]], layers: Layers
) -> tuple[int, list[Arrow]]:
    """``(arrows between layers, arrows running up or across independent siblings)``."""
    between = 0
    wrong: list[Arrow] = []
    for importer, imported in sorted(direct_imports(full)):
        here, there = _place(importer, layers), _place(imported, layers)
        if here is None or there is None or here[1] == there[1]:
            continue
        between += 1
        sideways = here[0] == there[0] and layers.independent[here[0]]
        if there[0] < here[0] or sideways:
            type_only = (importer, imported) not in runtime_edges
            line = _line(full, importer, imported)
            wrong.append(Arrow(importer, imported, line, type_only, sideways))
    return between, wrong


def strongly_connected(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The graph's strongly connected components of two or more modules (iterative Tarjan)."""
    successors: dict[str, list[str]] = {}
    for importer, imported in edges:
        successors.setdefault(importer, []).append(imported)
        successors.setdefault(imported, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(successors):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(successors[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(successors[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(components)


def shortest_cycle(start: str, edges: set[tuple[str, str]], members: set[str]) -> list[str]:
    """One shortest cycle through ``start`` inside ``members`` (breadth first)."""
    successors: dict[str, list[str]] = {}
    for importer, imported in sorted(edges):
        if importer in members and imported in members:
            successors.setdefault(importer, []).append(imported)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in successors.get(node, []):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    return [start]


# -- functions ---------------------------------------------------------------------------
def functions(root: Path, modules: Iterable[Module]) -> list[Function]:
    """Every function and method of the modules, with its qualified name and length."""
    found: list[Function] = []
    for module in modules:
        tree = ast.parse(module.path.read_text(encoding="utf-8"), str(module.path))
        relative = module.path.relative_to(root).as_posix()
        pending: list[tuple[ast.AST, str]] = [(tree, "")]
        while pending:
            node, prefix = pending.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    qualname = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        span = (child.end_lineno or child.lineno) - child.lineno + 1
                        where = f"{relative}:{child.lineno}"
                        found.append(Function(where, qualname, span))
                    pending.append((child, qualname + "."))
                else:
                    pending.append((child, prefix))
    return sorted(found, key=lambda f: (-f.lines, f.where))


# -- duplicates --------------------------------------------------------------------------
DUPLICATE_COUNT = re.compile(r"^(\d+) pairs? of places")


def duplicate_pairs(root: Path, packages: Sequence[str]) -> str:
    """The ``duplicates`` tool's pair count over the product's ``.py`` files, or why not."""
    tool = shutil.which("duplicates")
    if tool is None:
        return "duplicates is not on PATH (optional): figure skipped"
    with tempfile.TemporaryDirectory(prefix="cmpfleet-arch-") as tmp:
        copy = Path(tmp)
        for package in packages:
            for path in (root / package).rglob("*.py"):
                if "__pycache__" in path.parts:
                    continue
                target = copy / path.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target)
        answer = subprocess.run(
            [tool, "--repo", str(copy), "--most", "1", "--seconds", str(DUPLICATES_S)],
            capture_output=True,
            text=True,
            timeout=DUPLICATES_S + 30,
            check=False,
        )
    lines = answer.stdout.splitlines()
    first = lines[0] if lines else answer.stderr.strip() or "no answer"
    incomplete = [line for line in lines if line.startswith("incomplete:")]
    if first.startswith("no duplicates"):
        count = "0"
    elif match := DUPLICATE_COUNT.match(first):
        count = match.group(1)
    else:
        return f"duplicates gave no count: {first}"
    note = f" ({'; '.join(incomplete)})" if incomplete else ""
    return f"{count} pairs of places sharing 6+ lines in product .py files{note}"


# -- printing ----------------------------------------------------------------------------
def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:5.1f}%" if whole else "  n/a"


def report(root: Path) -> Iterator[str]:
    """Every figure, as the lines ``scripts/dev arch`` prints."""
    packages = product_packages(root)
    tree = folders(root, packages)
    modules = [module for folder in tree for module in folder.modules]
    total = sum(module.lines for module in modules)

    yield f"== files per folder (own modules, __init__ not counted; {len(modules)} files)"
    for folder in tree:
        yield f"{folder.module_count:4d}  {folder.name}"

    yield ""
    yield f"== share of product lines per folder (own modules; {total} lines in all)"
    for folder in sorted(tree, key=lambda f: (-f.lines, f.name)):
        yield f"{_share(folder.lines, total)}  {folder.lines:6d}  {folder.name}"

    yield ""
    yield "== share of product lines per package (recursive: its subpackages included)"
    for package in packages:
        inner = [f.name for f in tree if f.name.count(".") == 1 and _within(f.name, package)]
        for name in (package, *inner):
            lines = sum(m.lines for m in modules if _within(m.name, name))
            flag = "  over 30%" if total and lines / total > PACKAGE_SHARE_LIMIT else ""
            indent = "  " if name != package else ""
            yield f"{_share(lines, total)}  {lines:6d}  {indent}{name}{flag}"

    sys.path.insert(0, str(root))
    full = grimp.build_graph(*packages, cache_dir=None)
    runtime = grimp.build_graph(*packages, exclude_type_checking_imports=True, cache_dir=None)
    full_edges, runtime_edges = direct_imports(full), direct_imports(runtime)

    yield ""
    yield "== import arrows running back up (against the import-linter layers of pyproject.toml)"
    for layers in layer_contracts(root):
        between, wrong = arrows_against(full, runtime_edges, layers)
        scope = layers.groups[0][0].rpartition(".")[0] or "product"
        yield f"{len(wrong):4d} of {between} arrows between layers run against them: {layers.name} [{scope}]"
        for arrow in wrong:
            kind = "  (across independent siblings)" if arrow.sideways else ""
            kind += "  (type only)" if arrow.type_only else ""
            yield f"        {arrow.importer}:{arrow.line} -> {arrow.imported}{kind}"

    yield ""
    runtime_cycles = strongly_connected(runtime_edges)
    all_cycles = [c for c in strongly_connected(full_edges) if c not in runtime_cycles]
    yield f"== import cycles between modules: {len(runtime_cycles)} at run time"
    for members in runtime_cycles:
        cycle = shortest_cycle(members[0], runtime_edges, set(members))
        yield f"  {len(members)} modules: {' -> '.join(cycle)}"
    yield f"== cycles closed only by TYPE_CHECKING imports: {len(all_cycles)}"
    for members in all_cycles:
        cycle = shortest_cycle(members[0], full_edges, set(members))
        yield f"  {len(members)} modules: {' -> '.join(cycle)}"

    yield ""
    yield f"== the {LONGEST} longest functions (lines from def to last line)"
    for function in functions(root, modules)[:LONGEST]:
        yield f"{function.lines:4d}  {function.qualname}  {function.where}"

    yield ""
    yield "== duplicate pairs"
    yield duplicate_pairs(root, packages)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the figures of the tree at ``--root`` (default: this checkout)."""
    parser = argparse.ArgumentParser(prog="scripts/dev arch", description=__doc__)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure")
    args = parser.parse_args(argv)
    for line in report(args.root.resolve()):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
