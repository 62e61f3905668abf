"""Which kernel the next reboot boots, read from the bootloader's own files.

An unrelated package install can pull in a stock kernel and make it the default entry:
the rig keeps running fine until the next reboot comes up without the 64 GB BAR1. So the
default entry is read the way the bootloader reads it:

- ``grubby --info=DEFAULT`` output, when grubby exists (Fedora, RHEL; parsed here, run
  by ``hwcheck.hostfacts.grubby``);
- Boot Loader Specification entries (``/boot/loader/entries/*.conf``), chosen by
  grubenv's ``saved_entry`` or systemd-boot's ``loader.conf`` ``default``, else the
  newest version;
- ``grub.cfg`` menu entries (Debian, Ubuntu), chosen by its ``set default=`` or grubenv's
  ``saved_entry`` (an index, ``N>M``, a title or an id).

Anything else (another bootloader, unreadable files) is unknown, never a guess. Every
reader takes ``root`` so tests point it at a recorded tree.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from hwcheck.hostfacts.cmdline import split_cmdline, without_bootloader_args
from hwcheck.hostfacts.model import BootEntry
from hwcheck.textfile import read_text

GRUBENV_PATHS = ("boot/grub2/grubenv", "boot/grub/grubenv")
GRUB_CFG_PATHS = ("boot/grub/grub.cfg", "boot/grub2/grub.cfg")
BLS_DIRS = ("boot/loader/entries", "boot/efi/loader/entries", "efi/loader/entries")
LOADER_CONF_PATHS = (
    "boot/loader/loader.conf",
    "boot/efi/loader/loader.conf",
    "efi/loader/loader.conf",
)
_KERNEL_PREFIXES = ("vmlinuz-", "vmlinux-", "bzImage-", "kernel-")


def kernel_release(image_path: str) -> str | None:
    """``6.8.0-49-generic`` for ``/boot/vmlinuz-6.8.0-49-generic`` (or ``(hd0)/vmlinuz-..``)."""
    name = image_path.strip().strip('"').rsplit("/", 1)[-1]
    for prefix in _KERNEL_PREFIXES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return None


def _entry_args(text: str, env: dict[str, str]) -> tuple[str, ...]:
    """Arguments with grubenv variables expanded (``$kernelopts``); unknown ones dropped."""
    args: list[str] = []
    for arg in split_cmdline(text):
        if arg.startswith("$"):
            args.extend(split_cmdline(env.get(arg.lstrip("$").strip("{}"), "")))
        else:
            args.append(arg)
    return without_bootloader_args(args)


# -- grubenv ----------------------------------------------------------------------------


def parse_grubenv(text: str) -> dict[str, str]:
    """``key=value`` lines of a GRUB environment block (comments and ``#`` padding skipped)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value
    return values


def read_grubenv(root: Path) -> dict[str, str]:
    """The first grubenv found under ``root`` (empty when there is none)."""
    for relative in GRUBENV_PATHS:
        text = read_text(root / relative)
        if text is not None:
            return parse_grubenv(text)
    return {}


# -- grubby -----------------------------------------------------------------------------


def parse_grubby_info(text: str, env: dict[str, str] | None = None) -> BootEntry | None:
    """``grubby --info=DEFAULT`` output as the entry it describes (None: no kernel line)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() not in values:
            values[key.strip()] = value.strip().strip('"')
    if "kernel" not in values:
        return None
    return BootEntry(
        kernel=kernel_release(values["kernel"]),
        args=_entry_args(values.get("args", ""), env or {}),
        title=values.get("title"),
        source="grubby",
    )


# -- Boot Loader Specification entries ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlsEntry:
    """One ``loader/entries/*.conf`` file (``entry_id``: the file name without ``.conf``)."""

    entry_id: str
    title: str | None
    version: str | None
    linux: str | None
    options: str


def parse_bls_entry(entry_id: str, text: str) -> BlsEntry:
    """One BLS entry file: ``key value`` lines (``options`` may repeat: they add up)."""
    values: dict[str, str] = {}
    options: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        if key == "options":
            options.append(value.strip())
        else:
            values.setdefault(key, value.strip())
    return BlsEntry(
        entry_id=entry_id,
        title=values.get("title"),
        version=values.get("version"),
        linux=values.get("linux"),
        options=" ".join(options),
    )


def _version_key(entry: BlsEntry) -> list[tuple[int, int | str]]:
    """Sort key comparing versions part by part, numbers as numbers (newest sorts last)."""
    text = entry.version or (kernel_release(entry.linux or "") or entry.entry_id)
    return [
        (0, int(part)) if part.isdecimal() else (1, part) for part in re.split(r"[.\-_+~]", text)
    ]


def read_bls_entries(root: Path) -> list[BlsEntry]:
    """Every BLS entry under ``root``'s entry directories (the first directory that has any)."""
    for relative in BLS_DIRS:
        folder = root / relative
        try:
            files = sorted(folder.glob("*.conf"))
        except OSError:
            continue
        entries = [
            parse_bls_entry(path.stem, text)
            for path in files
            if (text := read_text(path)) is not None
        ]
        if entries:
            return entries
    return []


def _loader_default(root: Path) -> str | None:
    """systemd-boot's ``default`` pattern from ``loader.conf`` (None when not set)."""
    for relative in LOADER_CONF_PATHS:
        text = read_text(root / relative)
        if text is None:
            continue
        for line in text.splitlines():
            key, _, value = line.strip().partition(" ")
            if key == "default" and value.strip():
                return value.strip()
    return None


def default_bls_entry(entries: list[BlsEntry], saved: str | None, pattern: str | None) -> BlsEntry:
    """The entry booted: grubenv's ``saved_entry``, else ``loader.conf``'s, else the newest."""
    if saved:
        for entry in entries:
            if saved in (entry.entry_id, entry.title):
                return entry
    if pattern:
        matching = [e for e in entries if fnmatch.fnmatch(f"{e.entry_id}.conf", pattern)]
        if matching:
            return max(matching, key=_version_key)
    return max(entries, key=_version_key)


def bls_boot_entry(root: Path, env: dict[str, str]) -> BootEntry | None:
    """The default BLS entry as a ``BootEntry`` (None when there are no BLS entries)."""
    entries = read_bls_entries(root)
    if not entries:
        return None
    entry = default_bls_entry(entries, env.get("saved_entry"), _loader_default(root))
    kernel = entry.version or kernel_release(entry.linux or "")
    return BootEntry(
        kernel=kernel,
        args=_entry_args(entry.options, env),
        title=entry.title or entry.entry_id,
        source="bls",
    )


# -- grub.cfg ----------------------------------------------------------------------------

_MENU_LINE = re.compile(r"^\s*(menuentry|submenu)\s+(['\"])(.*?)\2(.*)\{\s*$")
_ENTRY_ID = re.compile(r"(?:\$menuentry_id_option|--id)\s+['\"]?([^'\"\s]+)")
_LINUX_LINE = re.compile(r"^\s*linux(?:efi|16)?\s+(\S+)(.*)$")
_SET_DEFAULT = re.compile(r"^\s*set\s+default=(['\"]?)(.*?)\1\s*$")


@dataclass(frozen=True, slots=True)
class GrubMenuEntry:
    """A ``menuentry`` of grub.cfg with where it sits (``position``: top-level index path)."""

    titles: tuple[str, ...]  # submenu titles, then the entry's own
    ids: tuple[str, ...]
    position: tuple[int, ...]  # (3,) top level; (1, 2) the third entry of submenu 1
    linux: str | None
    args: str


def parse_grub_cfg(text: str) -> tuple[list[GrubMenuEntry], str | None]:
    """The menu entries of grub.cfg, in order, and its ``set default=`` value.

    ``${next_entry}`` (a one-time boot) is skipped; the last other default set wins.
    """
    entries: list[GrubMenuEntry] = []
    default: str | None = None
    # Open blocks as (kind, title, id, index); kind "other" for braces that are no menu.
    stack: list[tuple[str, str, str, int]] = []
    counters: list[int] = [0]  # the next index at each submenu depth
    current_linux: tuple[str, str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        menu = _MENU_LINE.match(line)
        if menu is not None:
            kind, title = menu.group(1), menu.group(3)
            found = _ENTRY_ID.search(menu.group(4))
            stack.append((kind, title, found.group(1) if found else "", counters[-1]))
            counters[-1] += 1
            if kind == "submenu":
                counters.append(0)
            current_linux = None
            continue
        if stack and stack[-1][0] == "menuentry" and current_linux is None:
            linux = _LINUX_LINE.match(line)
            if linux is not None:
                current_linux = (linux.group(1), linux.group(2))
        if stripped.endswith("{"):
            stack.append(("other", "", "", -1))
        elif stripped == "}" and stack:
            kind, title, entry_id, index = stack.pop()
            if kind == "submenu":
                counters.pop()
            elif kind == "menuentry":
                parents = [s for s in stack if s[0] == "submenu"]
                entries.append(
                    GrubMenuEntry(
                        titles=(*(p[1] for p in parents), title),
                        ids=(*(p[2] for p in parents), entry_id),
                        position=(*(p[3] for p in parents), index),
                        linux=current_linux[0] if current_linux else None,
                        args=current_linux[1] if current_linux else "",
                    )
                )
                current_linux = None
        elif (found := _SET_DEFAULT.match(line)) is not None and "next_entry" not in found[2]:
            default = found.group(2)
    return entries, default


def resolve_grub_default(entries: list[GrubMenuEntry], selector: str) -> GrubMenuEntry | None:
    """The entry ``selector`` names: ``2``, ``1>2``, a title or id path, or a bare title/id."""
    parts = [part.strip() for part in (selector.strip() or "0").split(">")]
    if all(part.isdecimal() for part in parts):
        position = tuple(int(part) for part in parts)
        return next((e for e in entries if e.position == position), None)
    for entry in entries:
        if len(parts) == len(entry.titles) and all(
            part in (title, entry_id)
            for part, title, entry_id in zip(parts, entry.titles, entry.ids, strict=True)
        ):
            return entry
    if len(parts) == 1:
        return next((e for e in entries if parts[0] in (e.titles[-1], e.ids[-1])), None)
    return None


def grub_cfg_boot_entry(root: Path, env: dict[str, str]) -> BootEntry | None:
    """grub.cfg's default entry (None: no grub.cfg, or its default names no entry)."""
    for relative in GRUB_CFG_PATHS:
        text = read_text(root / relative)
        if text is None:
            continue
        entries, default = parse_grub_cfg(text)
        selector = default or "0"
        if "saved_entry" in selector:
            selector = env.get("saved_entry") or "0"
        entry = resolve_grub_default(entries, selector)
        if entry is None or entry.linux is None:
            return None
        return BootEntry(
            kernel=kernel_release(entry.linux),
            args=_entry_args(entry.args, env),
            title=">".join(entry.titles),
            source="grub.cfg",
        )
    return None


def default_boot_entry(root: Path, grubby_info: str | None = None) -> BootEntry | None:
    """The entry the next reboot boots: grubby's answer, else BLS, else grub.cfg; None unknown."""
    env = read_grubenv(root)
    if grubby_info is not None:
        entry = parse_grubby_info(grubby_info, env)
        if entry is not None:
            return entry
    return bls_boot_entry(root, env) or grub_cfg_boot_entry(root, env)
