"""Store fixtures: every store test runs on SQLite and on a real PostgreSQL server.

The PostgreSQL server is ``$CMPFLEET_TEST_PG_URL`` when set; otherwise a throwaway
cluster started for the session (``initdb`` + ``pg_ctl`` from /usr/lib/postgresql/*/bin,
as the ``postgres`` user when we are root) on a free loopback port with its socket in the
temp dir, stopped and removed at the end. Each test gets its own schema on it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from daemon.store import Store
from tests.support.external import in_ci, require_program
from tests.support.fleetd import free_port
from tests.support.store_rows import UrlFactory

PG_URL_ENV = "CMPFLEET_TEST_PG_URL"


# -- a throwaway PostgreSQL cluster ---------------------------------------------------


def _pg_bindir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl."""
    found = [
        path.parent
        for path in Path("/usr/lib/postgresql").glob("*/bin/initdb")
        if (path.parent / "pg_ctl").exists()
    ]
    if not found:
        return None

    def version(bindir: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in bindir.parent.name.split(".") if part.isdigit())

    return max(found, key=version)


def _free_port() -> int:
    return free_port()


@dataclass(frozen=True)
class _Cluster:
    bindir: Path
    root: Path
    run_as_postgres: bool

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    def argv(self, *args: str) -> list[str]:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self.run_as_postgres:
            return ["runuser", "-u", "postgres", "--", *command]
        return command

    def run(self, *args: str, timeout_s: float = 120.0) -> None:
        result = subprocess.run(
            self.argv(*args), capture_output=True, text=True, timeout=timeout_s, check=False
        )
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(
                f"{' '.join(args[:2])} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()} {log}"
            )


def _start_cluster(bindir: Path) -> tuple[_Cluster, int]:
    root = Path(tempfile.mkdtemp(prefix="cmpfleet-pg-"))
    run_as_postgres = os.geteuid() == 0
    if run_as_postgres:
        account = pwd.getpwnam("postgres")
        os.chown(root, account.pw_uid, account.pw_gid)
    cluster = _Cluster(bindir, root, run_as_postgres)
    cluster.run(
        "initdb", "-D", str(cluster.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "-N"
    )
    last_error: Exception | None = None
    for _ in range(3):  # another process may take the free port before the server does
        port = _free_port()
        settings = (
            f"\nlisten_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{root}'\nfsync = off\nsynchronous_commit = off\n"
            "full_page_writes = off\nmax_connections = 100\n"
        )
        with (cluster.data / "postgresql.auto.conf").open("a") as conf:
            conf.write(settings)
        try:
            cluster.run(
                "pg_ctl", "-D", str(cluster.data), "-l", str(cluster.log), "-w", "-t", "60", "start"
            )
        except RuntimeError as exc:
            last_error = exc
            continue
        return cluster, port
    _remove(cluster)
    raise RuntimeError(f"could not start PostgreSQL: {last_error}")


def _remove(cluster: _Cluster) -> None:
    shutil.rmtree(cluster.root, ignore_errors=True)


def _stop_cluster(cluster: _Cluster) -> None:
    try:
        cluster.run("pg_ctl", "-D", str(cluster.data), "-m", "immediate", "-w", "stop")
    finally:
        _remove(cluster)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A SQLAlchemy URL of a database on a running PostgreSQL server."""
    given = os.environ.get(PG_URL_ENV)
    if given:
        yield given
        return
    bindir = _pg_bindir()
    if bindir is None:
        require_program("pg_ctlcluster", "postgresql")  # installs it, or skips/fails
        bindir = _pg_bindir()
    if bindir is None:
        message = "needs initdb/pg_ctl under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
        if in_ci():
            pytest.fail(f"{message}: missing under CI=true", pytrace=False)
        pytest.skip(message)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.fail("the postgresql package installed no `postgres` user", pytrace=False)
    cluster, port = _start_cluster(bindir)
    try:
        with psycopg.connect(
            f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True
        ) as conn:
            conn.execute("CREATE DATABASE cmpfleet_test")
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/cmpfleet_test"
    finally:
        _stop_cluster(cluster)


def libpq_url(sqlalchemy_url: str) -> str:
    """The same database as a plain libpq URI (for psycopg.connect)."""
    url = make_url(sqlalchemy_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


@contextlib.contextmanager
def pg_schema(server_url: str) -> Iterator[str]:
    """A fresh schema on the server; yields a URL whose search_path points at it."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = make_url(server_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


# -- per-test databases ---------------------------------------------------------------


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.external)],
)
def new_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[UrlFactory]:
    """Make URLs of fresh, empty databases of one kind (SQLite files or PG schemas)."""
    with contextlib.ExitStack() as stack:
        counter = iter(range(1_000_000))
        if request.param == "sqlite":

            def make() -> str:
                return f"sqlite:///{tmp_path / f'fleet{next(counter)}.db'}"

        else:
            server_url: str = request.getfixturevalue("pg_server_url")

            def make() -> str:
                return stack.enter_context(pg_schema(server_url))

        yield make


@pytest.fixture
def store_url(new_url: UrlFactory) -> str:
    """The URL of a fresh, empty database."""
    return new_url()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open store on a fresh database (SQLite and PostgreSQL)."""
    opened = Store.open(store_url)
    try:
        yield opened
    finally:
        opened.close()
