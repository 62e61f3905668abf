"""tests/ mirrors the house: wing folders where the product has wings, helpers in one place.

The rules are data (below), so a new wing or a new mirrored package is a line here:

- a mirrored folder (``tests/daemon``, ``tests/hwcheck``) holds no test file of its own,
  only subfolders, each named after a wing of its package;
- a test imports other test code only from ``tests/support`` (never another test module,
  a conftest or a helper kept beside its tests);
- a Python file under tests/ is a test module, a conftest, a package marker, a helper in
  ``tests/support``, or one of the child scripts listed (run as a process, never imported).

``CROSS_IMPORTS_LEFT`` is what is still to move to tests/support: it may only shrink (an
entry that no longer holds fails too, so it is removed with the move).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
SUPPORT = "tests.support"
# Mirrored folder -> its wings beyond the product package's own subpackages: the daemon's
# process files and shared modules (pyproject.toml's wing contract names them), hwcheck's
# top-level modules.
MIRRORED: dict[str, frozenset[str]] = {
    "daemon": frozenset({"process", "shared"}),
    "hwcheck": frozenset({"shared"}),
}
CHILD_SCRIPTS = frozenset({"tests/store/xid_writer.py", "tests/kernellog/fake_journalctl.py"})
# (importing module, imported test module) still to move into tests/support.
CROSS_IMPORTS_LEFT: frozenset[tuple[str, str]] = frozenset()


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def imported_tests_modules(path: Path) -> set[str]:
    """The ``tests.*`` modules ``path`` imports (``from tests.x import y`` names ``tests.x``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "tests" or node.module.startswith("tests."):
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tests."))
    return found


def test_a_mirrored_folder_holds_wing_subfolders_only() -> None:
    wrong = []
    for package, extra in MIRRORED.items():
        folder = TESTS / package
        product = {p.name for p in (ROOT / package).iterdir() if (p / "__init__.py").exists()}
        wings = product | extra
        for entry in sorted(folder.iterdir()):
            if entry.name in {"__init__.py", "conftest.py", "__pycache__"}:
                continue
            if entry.is_dir():
                if entry.name not in wings and entry.name != "data":
                    wrong.append(f"{entry.relative_to(ROOT)}: not a wing of {package}/")
                elif entry.name != "data" and not (entry / "__init__.py").exists():
                    wrong.append(f"{entry.relative_to(ROOT)}: no __init__.py")
            elif entry.suffix == ".py":
                wrong.append(f"{entry.relative_to(ROOT)}: a flat file (move it to its wing)")
    assert wrong == []


def test_tests_import_other_test_code_only_from_support() -> None:
    found = set()
    for path in python_files():
        importer = module_name(path)
        if importer.startswith(SUPPORT + ".") or importer == SUPPORT:
            continue
        for imported in imported_tests_modules(path):
            if imported != SUPPORT and not imported.startswith(SUPPORT + "."):
                found.add((importer.removesuffix(".__init__"), imported))
    assert found - CROSS_IMPORTS_LEFT == set(), "import it from tests/support instead"
    assert CROSS_IMPORTS_LEFT - found == set(), "moved: remove it from CROSS_IMPORTS_LEFT"


def test_every_python_file_under_tests_has_its_place() -> None:
    stray = []
    for path in python_files():
        name = path.relative_to(ROOT).as_posix()
        if path.name.startswith("test_") or path.name in {"conftest.py", "__init__.py"}:
            continue
        if name.startswith("tests/support/") or name in CHILD_SCRIPTS:
            continue
        stray.append(name)
    assert stray == [], "a helper belongs in tests/support"
