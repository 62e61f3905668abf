"""Opening the store: a bad URL or an unreachable database is one clear line, password masked."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from daemon.store import Store, StoreError, mask_url


def _refused_port() -> int:
    """A loopback port nobody listens on (bound then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _open_error(url: str) -> str:
    with pytest.raises(StoreError) as caught:
        Store.open(url)
    message = str(caught.value)
    assert "\n" not in message
    assert "Traceback" not in message
    return message


def test_unreachable_postgresql_names_the_url_without_the_password() -> None:
    port = _refused_port()
    message = _open_error(f"postgresql+psycopg://fleet:hunter2@127.0.0.1:{port}/fleet")

    assert "hunter2" not in message
    assert f"store postgresql+psycopg://fleet:***@127.0.0.1:{port}/fleet:" in message
    assert "refused" in message.lower() or "connect" in message.lower()


def test_a_password_given_as_a_query_parameter_is_masked_too() -> None:
    port = _refused_port()
    url = f"postgresql+psycopg://fleet@127.0.0.1:{port}/fleet?password=hunter2&sslmode=disable"
    message = _open_error(url)
    assert "hunter2" not in message
    assert "password=***" in message and "sslmode=disable" in message


def test_garbage_url() -> None:
    message = _open_error("not a url at all")
    assert message.startswith("store not a url at all: not a database URL")


def test_unknown_database_kind() -> None:
    message = _open_error("nosuchdb://user:secret@host/db")
    assert "secret" not in message
    assert "cannot use this URL" in message


def test_missing_sqlite_directory(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "fleet.db"
    message = _open_error(f"sqlite:///{missing}")
    assert message == f"store sqlite:///{missing}: directory {missing.parent} does not exist"


def test_in_memory_sqlite_is_refused() -> None:
    assert "does not survive a restart" in _open_error("sqlite://")
    assert "does not survive a restart" in _open_error("sqlite:///:memory:")


def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    junk = tmp_path / "fleet.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    message = _open_error(f"sqlite:///{junk}")
    assert "not a database" in message


def test_mask_url_hides_passwords_even_in_urls_that_do_not_parse() -> None:
    assert (
        mask_url("postgresql+psycopg://u:p4ss@db:5432/x") == "postgresql+psycopg://u:***@db:5432/x"
    )
    assert mask_url("weird://u:p4ss@[bad") == "weird://u:***@[bad"
    assert (
        mask_url("sqlite:////var/lib/cmpfleet/fleet.db") == "sqlite:////var/lib/cmpfleet/fleet.db"
    )


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    from sqlalchemy import text

    store = Store.open(f"sqlite:///{tmp_path / 'fleet.db'}")
    try:
        with store.read() as session:
            pragmas = {
                name: session.execute(text(f"PRAGMA {name}")).scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            }
    finally:
        store.close()
    assert pragmas["journal_mode"] == "wal"
    assert pragmas["synchronous"] == 1  # NORMAL
    assert pragmas["foreign_keys"] == 1
    assert int(pragmas["busy_timeout"] or 0) >= 5000
