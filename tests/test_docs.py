"""The project's own docs: what the code cites exists, and the reference covers the outside.

A maintainer who clones the repository must be able to read every document the code
points at: a citation of a design document kept elsewhere, of a ``docs/`` file that is not
there, or of a section (``docs/domain.md "Xid catalogue"``, ``README "Canaries"``) that no
heading of that file carries fails here, naming the file and line. Markdown links between
the repository's own files are held to the same rule (the file, and the heading an anchor
names).

``docs/reference.md`` is the outside of the product: every config key, check id, built-in
scenario, fleetctl command, API path and metric the code defines must be named there, so
a new one cannot ship undocumented.
"""

from __future__ import annotations

import re
import subprocess
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference.md"
SCANNED_SUFFIXES = {".py", ".toml", ".md", ".sh", ".js", ".service", ".yml", ".yaml"}
SCANNED_NAMES = {"scripts/dev", ".ci/run"}
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()

# Design documents that live outside the repository (spelt in pieces so this file does
# not match itself), and paths that only exist on the machines this was built on.
_ABSENT_DOCS = "|".join(("CON" + "TRACT", "DE" + "SIGN", "DO" + "MAIN", "ENV" + "-NOTES"))
ABSENT = re.compile(rf"(?<![\w-])(?:{_ABSENT_DOCS})(?:\.md)?(?![\w-])|/work/" + "shared")
DOC_PATH = re.compile(r"(?<![\w/.-])docs/([\w./-]+?\.md)\b")
# A section citation: docs/FILE.md or README, optionally a comma, then "Heading".
SECTION = re.compile(r'(?<![\w/.-])(docs/[\w./-]+?\.md|README(?:\.md)?),? "([^"\n]+)"')
SPLIT_SECTION = re.compile(r'(?<![\w/.-])(docs/[\w./-]+?\.md|README(?:\.md)?),? "[^"\n]*$')
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")


def repository_files() -> list[Path]:
    """The files git tracks, and the untracked ones it does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return [ROOT / name for name in listed if name and (ROOT / name).is_file()]


def scanned_files() -> list[Path]:
    """The text files whose citations are checked (the vendored chart library left out)."""
    chosen = []
    for path in repository_files():
        relative = path.relative_to(ROOT).as_posix()
        if relative == THIS_FILE or "uPlot" in path.name:
            continue
        if path.suffix in SCANNED_SUFFIXES or relative in SCANNED_NAMES:
            chosen.append(path)
    return chosen


def headings(markdown: str) -> list[str]:
    """Every heading's text (code fences skipped), backticks removed."""
    found: list[str] = []
    fenced = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.append(match.group(1).replace("`", ""))
    return found


def anchors(markdown: str) -> set[str]:
    """GitHub's anchors for the headings (``-1``, ``-2`` for repeats)."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for text in headings(markdown):
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def cited_file(name: str) -> Path:
    return ROOT / ("README.md" if name.startswith("README") else name)


def citation_problems(path: Path) -> Iterator[str]:
    """Each bad citation in the repository file ``path``, as ``file:line: what is wrong``."""
    text = path.read_text(encoding="utf-8", errors="replace")
    yield from text_problems(text, path.relative_to(ROOT).as_posix(), path.parent)


def text_problems(text: str, name: str, base: Path) -> Iterator[str]:
    """Bad citations in ``text`` (the file ``name``; its Markdown links resolve from ``base``)."""
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}"
        for match in ABSENT.finditer(line):
            yield f"{where}: cites {match.group(0)!r}, which is not in the repository"
        for match in DOC_PATH.finditer(line):
            if not (DOCS / match.group(1)).is_file():
                yield f"{where}: cites docs/{match.group(1)}, which does not exist"
        for match in SECTION.finditer(line):
            target = cited_file(match.group(1))
            if target.is_file() and match.group(2) not in headings(target.read_text()):
                yield f'{where}: {match.group(1)} has no heading "{match.group(2)}"'
        if SPLIT_SECTION.search(line) and not SECTION.search(line):
            yield f"{where}: a section citation split over lines (keep it on one line)"
        if name.endswith(".md"):
            yield from link_problems(base, name, where, line)


def link_problems(base: Path, name: str, where: str, line: str) -> Iterator[str]:
    """Relative Markdown links: the file must exist, and an anchor must be a heading's."""
    for match in MD_LINK.finditer(line):
        link = match.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", link):
            continue  # http:, https:, mailto:: outside the repository
        target_name, _, anchor = link.partition("#")
        target = (base / target_name).resolve() if target_name else base / Path(name).name
        if not target.exists():
            yield f"{where}: link to {link}, which does not exist"
        elif anchor and target.suffix == ".md" and anchor not in anchors(target.read_text()):
            yield f"{where}: link to {link}: no such heading in {target.name}"


def test_every_cited_document_and_section_is_in_the_repository() -> None:
    problems = [problem for path in scanned_files() for problem in citation_problems(path)]
    assert problems == [], "\n".join(problems)


def test_the_docs_are_there() -> None:
    for name in ("architecture.md", "reference.md", "domain.md"):
        assert (DOCS / name).is_file(), name
    readme = (ROOT / "README.md").read_text()
    for name in ("docs/architecture.md", "docs/reference.md", "docs/domain.md"):
        assert f"]({name}" in readme, f"the README does not link {name}"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("# see DO" + 'MAIN.md, "Xid"', "not in the repository"),
        ("# the CON" + "TRACT's keys", "not in the repository"),
        ('"""docs/nowhere.md says so."""', "does not exist"),
        ('# docs/domain.md "No such heading"', 'no heading "No such heading"'),
        ('# README "No such heading"', 'no heading "No such heading"'),
        ('# see docs/domain.md "Xid', "split over lines"),
        ("[x](docs/domain.md#no-such-anchor)", "no such heading"),
        ("[x](nowhere.md)", "does not exist"),
    ],
)
def test_a_bad_citation_is_named(line: str, problem: str) -> None:
    name = "probe.md" if line.startswith("[") else "probe.py"
    found = list(text_problems(line + "\n", name, ROOT))  # links resolve from the root
    assert len(found) == 1, found
    assert problem in found[0]


def test_good_citations_pass() -> None:
    lines = [
        '# docs/domain.md "Xid catalogue" and docs/domain.md, "VRAM unlock bands"',
        'See README "Quick tour"; CONTRACT_CHECK_IDS is a name, not a citation.',
        "[tour](README.md#quick-tour), [domain](docs/domain.md#xid-catalogue)",
    ]
    assert list(text_problems("\n".join(lines), "probe.md", ROOT)) == []


# -- the reference covers the outside ---------------------------------------------------
def reference_section(title: str) -> str:
    """The text of the reference's section headed ``title``, subsections included."""
    text = REFERENCE.read_text()
    lines = text.splitlines()
    for index, line in enumerate(lines):
        match = re.match(r"^(#{2,6})\s+(.*)$", line)
        if match and match.group(2).replace("`", "") == title:
            depth = len(match.group(1))
            body = []
            for rest in lines[index + 1 :]:
                heading = re.match(r"^(#{2,6})\s", rest)
                if heading and len(heading.group(1)) <= depth:
                    break
                body.append(rest)
            return "\n".join(body)
    raise AssertionError(f"docs/reference.md has no section {title!r}")


def leaf_keys(model: type[BaseModel]) -> Iterator[str]:
    """Every key a settings model accepts, nested tables' keys included (by their alias)."""
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else None
        yield alias or field.alias or name
        for argument in (field.annotation, *typing.get_args(field.annotation)):
            for inner in (argument, *typing.get_args(argument)):
                if isinstance(inner, type) and issubclass(inner, BaseModel):
                    yield from leaf_keys(inner)


def test_every_config_key_is_in_the_reference() -> None:
    from daemon.config import Settings

    missing = []
    for section, field in Settings.model_fields.items():
        annotation = field.annotation
        model = typing.get_args(annotation)[1] if section == "xid" else annotation
        assert isinstance(model, type) and issubclass(model, BaseModel), section
        title = "[xid.N]" if section == "xid" else f"[{section}]"
        text = reference_section(title)
        missing += [f"{section}.{key}" for key in leaf_keys(model) if f"`{key}`" not in text]
    assert missing == [], f"config keys not in docs/reference.md: {missing}"


def test_every_check_id_is_in_the_reference() -> None:
    from daemon.config import KNOWN_CHECK_IDS

    text = reference_section("Checks")
    missing = sorted(check for check in KNOWN_CHECK_IDS if f"`{check}`" not in text)
    assert missing == [], f"check ids not in docs/reference.md's Checks: {missing}"


def test_every_built_in_scenario_is_in_the_reference() -> None:
    from hwcheck.sim.scenario import builtin_scenario_names

    text = reference_section("Simulation")
    missing = [name for name in builtin_scenario_names() if f"`{name}`" not in text]
    assert missing == [], f"scenarios not in docs/reference.md's Simulation: {missing}"


def command_paths() -> Iterator[str]:
    """Every fleetctl command, as the words that call it (``caps apply``)."""
    import typer

    from daemon.cli.app import app

    def walk(command: typing.Any, words: tuple[str, ...]) -> Iterator[str]:
        children = getattr(command, "commands", None)
        if words and (not children or getattr(command, "invoke_without_command", False)):
            yield " ".join(words)
        for name, child in (children or {}).items():
            yield from walk(child, (*words, name))

    yield from walk(typer.main.get_command(app), ())


def test_every_fleetctl_command_is_in_the_reference() -> None:
    text = reference_section("fleetctl")
    missing = [
        words for words in command_paths() if not re.search(rf"`{re.escape(words)}[ `]", text)
    ]
    assert missing == [], f"fleetctl commands not in docs/reference.md: {missing}"


def api_paths() -> set[str]:
    """Every path a route of ``web/`` declares (read from the source: routes move)."""
    route = re.compile(
        r"""\.(?:get|post|head|put|delete|api_route|add_api_route)\(\s*\n?\s*"(/[^"]*)\"""",
        re.MULTILINE,
    )
    paths: set[str] = set()
    for path in (ROOT / "web").rglob("*.py"):
        paths |= set(route.findall(path.read_text()))
    return paths


def test_every_api_path_is_in_the_reference() -> None:
    text = reference_section("HTTP API")
    paths = api_paths()
    assert {"/healthz", "/api/v1/status", "/metrics"} <= paths, paths  # the scan finds routes
    missing = sorted(path for path in paths if path not in text)
    assert missing == [], f"API paths not in docs/reference.md's HTTP API: {missing}"


def test_every_metric_is_in_the_reference() -> None:
    from tests.support.metrics import every_collector

    # The guard's series are in its own section ("Traffic guard"; tests/guard checks them).
    collectors = every_collector(guard=False)
    names = {family.name for each in collectors for family in each.collect()}
    assert len(names) > 20, names
    text = reference_section("Prometheus metrics")
    missing = sorted(n for n in names if f"`{n}" not in text and f"`{n}_total" not in text)
    assert missing == [], f"metrics not in docs/reference.md: {missing}"
