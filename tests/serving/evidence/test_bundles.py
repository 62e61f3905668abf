"""The bundles on disk: modes, the size caps, pruning oldest first, a masked export."""

from __future__ import annotations

import io
import stat
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from serving.errors import InvalidInput, NotFound
from serving.evidence.bundles import BundleStore, check_id, new_bundle_id
from serving.evidence.settings import BUNDLE_MAX_BYTES
from serving.recipe.masking import KnownSecrets

T0 = datetime(2026, 12, 6, 5, 0, tzinfo=UTC)


def write(store: BundleStore, at: datetime, kind: str, size: int = 10) -> str:
    path = store.open(new_bundle_id(at, kind))
    store.write_part(path, "cards.json", {"pad": "x" * size})
    store.write_part(path, "summary.json", {"id": path.name})
    return path.name


def test_directories_are_0700_and_files_0600(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, 1 << 30)
    bundle_id = write(store, T0, "xid31")
    assert stat.S_IMODE(store.root.stat().st_mode) == 0o700
    assert stat.S_IMODE((store.root / bundle_id).stat().st_mode) == 0o700
    for part in (store.root / bundle_id).iterdir():
        assert stat.S_IMODE(part.stat().st_mode) == 0o600


def test_the_oldest_go_first_and_the_new_one_stays(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, 25_000)
    ids = [write(store, T0 + timedelta(minutes=n), "cuda_fault", 10_000) for n in range(4)]
    removed = store.prune(keep=ids[-1])
    assert removed == [ids[0], ids[1]]
    assert store.ids() == [ids[3], ids[2]]


def test_the_log_is_cut_from_its_start_to_fit(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, 1 << 30)
    path = store.open(new_bundle_id(T0, "x"))
    lines = [f"line {n} " + "y" * 90 for n in range(1000)]
    size = store.write_log(path, lines, 10_000)
    assert size <= 10_200
    text = (path / "engine.log").read_text().splitlines()
    assert text[0].startswith("[... ") and text[-1] == lines[-1]
    assert store.budget_left(path) <= BUNDLE_MAX_BYTES - size


def test_two_events_in_one_millisecond_get_two_bundles(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, 1 << 30)
    first = write(store, T0, "xid31")
    second = write(store, T0, "xid31")
    assert first != second and second.endswith("-2")
    assert check_id(second) == second


def test_ids_are_never_paths(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, 1 << 30)
    with pytest.raises(InvalidInput):
        store.read("../../etc")
    with pytest.raises(NotFound):
        store.read(new_bundle_id(T0, "gone"))


def test_the_export_masks_every_secret_and_the_host_name(tmp_path: Path) -> None:
    store = BundleStore(tmp_path, 1 << 30)
    path = store.open(new_bundle_id(T0, "xid31"))
    store.write_part(path, "launch.json", {"argv": ["--api-key", "sk-LEAK-1"], "host": "rig7"})
    store.write_part(path, "engine.log", "HF_TOKEN=hf_LEAK-2 on rig7\n")
    known = KnownSecrets({"sk-LEAK-1", "hf_LEAK-2"})
    data = store.export(path.name, known.mask, "rig7")
    texts = _members(data)
    assert set(texts) == {f"{path.name}/launch.json", f"{path.name}/engine.log"}
    blob = "\n".join(texts.values())
    assert "sk-LEAK-1" not in blob and "hf_LEAK-2" not in blob and "rig7" not in blob
    assert "<host>" in blob
    kept = "\n".join(_members(store.export(path.name, known.mask, None)).values())
    assert "rig7" in kept


def _members(data: bytes) -> dict[str, str]:
    found: dict[str, str] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            assert handle is not None
            found[member.name] = handle.read().decode()
    return found
