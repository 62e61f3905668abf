"""Launchers: real processes for the bare-process launcher, a fake runtime CLI for containers."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from serving.recipe.spec import LaunchMode, LaunchSpec
from serving.runtime.container_launcher import ContainerLauncher, parse_inspect
from serving.runtime.engine_record import EngineRecord, RecordError, spec_hash
from serving.runtime.launchers import EngineHandle, LauncherError, LaunchError
from serving.runtime.process_launcher import ProcessLauncher
from tests.support.engine_helpers import (
    FakeRuntime,
    free_port,
    is_running,
    kill_group,
    sim_argv,
    sim_spec,
)
from tests.support.waiting import DEADLINE_SCALE, wait_until

# An engine's exit after its stop signal: a fraction of a second, quiet. A deadline only a
# broken run reaches, stretched like every wait's: an engine stopped while its interpreter
# still started up outlived 5 s on a loaded 2-core machine (a fresh clone's CI run).
STOP_WAIT_S = 5 * DEADLINE_SCALE


def group_spec(tmp_path: Path) -> tuple[LaunchSpec, Path]:
    """A leader that starts a worker in its group; both note which signal they got."""
    script = tmp_path / "group_engine.py"
    out = tmp_path / "signals.txt"
    script.write_text(
        "import signal, subprocess, sys\n"
        "out, role = sys.argv[1], sys.argv[2]\n"
        "def handler(signum, frame):\n"
        "    with open(out, 'a') as f:\n"
        "        f.write(f'{role} {signal.Signals(signum).name}\\n')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGINT, handler)\n"
        "signal.signal(signal.SIGTERM, handler)\n"
        "if role == 'leader':\n"
        "    subprocess.Popen([sys.executable, __file__, out, 'worker'])\n"
        "print(role, 'up', flush=True)\n"
        "signal.pause()\n"
    )
    spec = LaunchSpec(
        mode=LaunchMode.PROCESS,
        argv=(sys.executable, str(script), str(out), "leader"),
        env={},
        host="127.0.0.1",
        port=free_port(),
        served_model_name="x",
    )
    return spec, out


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def cleanup() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        kill_group(pid)


def exit_spec(code: int) -> LaunchSpec:
    return replace(
        sim_spec(free_port()),
        argv=(sys.executable, "-c", f"print('bye'); raise SystemExit({code})"),
    )


# ----------------------------------------------------------------------------------------
# ProcessLauncher
# ----------------------------------------------------------------------------------------


def test_start_writes_the_adoption_record_and_logs_to_the_file(
    state_dir: Path, cleanup: list[int]
) -> None:
    launcher = ProcessLauncher(state_dir)
    spec = sim_spec(free_port())
    handle = launcher.start(spec)
    cleanup.append(handle.pid)
    record = launcher.read_record()
    assert record is not None
    assert record.pid == handle.pid
    since_boot_s = psutil.Process(handle.pid).create_time() - psutil.boot_time()
    assert record.start_time == pytest.approx(since_boot_s, abs=0.05)
    assert record.argv == spec.argv
    assert record.port == spec.port
    assert record.mode is LaunchMode.PROCESS
    assert record.spec_hash == spec_hash(spec)
    assert oct((state_dir / "engine.pid").stat().st_mode & 0o777) == "0o600"
    # Its own session and process group: not tied to fleetd's terminal or group.
    assert os.getsid(handle.pid) == handle.pid
    assert os.getpgid(handle.pid) == handle.pid
    assert launcher.is_alive(handle)
    wait_until(
        lambda: "Starting vLLM API server" in launcher.log_path.read_text(), 10, "engine output"
    )
    assert launcher.log_path.read_text().startswith("[cmpfleet] launch ")
    assert "CMPFLEET_TEST_ENGINE" in json.dumps(spec.env)


def test_the_engine_gets_none_of_fleetds_own_settings_or_secrets(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CMPFLEET_STORE_URL", "postgresql://fleet:DBPASS@db/fleet")
    monkeypatch.setenv("FLEETCTL_TOKEN", "api-token-value")
    monkeypatch.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    monkeypatch.setenv("HF_HOME", "/models/hf")
    show = "import os; print(sorted(n for n in os.environ if n.isupper()))"
    spec = replace(exit_spec(0), argv=(sys.executable, "-c", show))
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(spec)
    assert launcher.wait(handle, timeout_s=10)
    launcher.release(handle)
    names = launcher.log_path.read_text().splitlines()[-1]
    assert "'HF_HOME'" in names  # the host's own environment still reaches the engine
    assert "'CMPFLEET_TEST_ENGINE'" in names  # and so does every variable the recipe names
    for hidden in ("CMPFLEET_STORE_URL", "FLEETCTL_TOKEN", "NOTIFY_SOCKET"):
        assert f"'{hidden}'" not in names


def test_exit_code_of_a_child_is_known(state_dir: Path) -> None:
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(exit_spec(3))
    assert launcher.wait(handle, timeout_s=10)
    assert not launcher.is_alive(handle)
    assert launcher.exit_code(handle) == 3
    launcher.release(handle)
    assert launcher.read_record() is None
    assert "bye" in launcher.log_path.read_text()


def test_wait_times_out_while_the_engine_runs(state_dir: Path, cleanup: list[int]) -> None:
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(sim_spec(free_port()))
    cleanup.append(handle.pid)
    assert launcher.wait(handle, timeout_s=0.1) is False


def test_graceful_stop_signals_the_whole_group_with_sigint(
    tmp_path: Path, state_dir: Path, cleanup: list[int]
) -> None:
    spec, out = group_spec(tmp_path)
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(spec)
    cleanup.append(handle.pid)
    wait_until(lambda: launcher.log_path.read_text().count(" up") == 2, 10, "leader and worker")
    launcher.signal_stop(handle, graceful=True)
    assert launcher.wait(handle, timeout_s=STOP_WAIT_S)
    wait_until(lambda: out.exists() and len(out.read_text().splitlines()) == 2, 5, "both")
    assert sorted(out.read_text().splitlines()) == ["leader SIGINT", "worker SIGINT"]
    assert launcher.exit_code(handle) == 0


def test_firm_stop_sends_sigterm(tmp_path: Path, state_dir: Path, cleanup: list[int]) -> None:
    spec, out = group_spec(tmp_path)
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(spec)
    cleanup.append(handle.pid)
    wait_until(lambda: launcher.log_path.read_text().count(" up") == 2, 10, "leader and worker")
    launcher.signal_stop(handle, graceful=False)
    assert launcher.wait(handle, timeout_s=STOP_WAIT_S)
    wait_until(lambda: out.exists() and len(out.read_text().splitlines()) == 2, 5, "both")
    assert sorted(out.read_text().splitlines()) == ["leader SIGTERM", "worker SIGTERM"]


def test_survivors_are_the_group_members_left_behind(state_dir: Path, cleanup: list[int]) -> None:
    # The leader exits at once, leaving a worker in its process group.
    code = (
        "import subprocess, sys;"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
    )
    spec = replace(sim_spec(free_port()), argv=(sys.executable, "-c", code))
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(spec)
    cleanup.append(handle.pid)
    assert launcher.wait(handle, timeout_s=10)
    survivors = launcher.survivors(handle)
    assert len(survivors) == 1
    assert os.getpgid(survivors[0]) == handle.pid


def test_kill_sends_sigkill(state_dir: Path, cleanup: list[int]) -> None:
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(sim_spec(free_port(), "--sim-ignore-signals"))
    cleanup.append(handle.pid)
    launcher.kill(handle)
    assert launcher.wait(handle, timeout_s=STOP_WAIT_S)
    assert launcher.exit_code(handle) == -signal.SIGKILL


def test_missing_program_is_a_one_line_launch_error(state_dir: Path) -> None:
    spec = replace(sim_spec(free_port()), argv=("/nonexistent/vllm", "serve", "m"))
    with pytest.raises(LaunchError, match=r"cannot run '/nonexistent/vllm': No such file"):
        ProcessLauncher(state_dir).start(spec)
    assert "launch failed" in (state_dir / "engine.log").read_text()


def test_refuses_to_start_over_a_recorded_engine_that_still_runs(
    state_dir: Path, cleanup: list[int]
) -> None:
    first = ProcessLauncher(state_dir).start(sim_spec(free_port()))
    cleanup.append(first.pid)
    with pytest.raises(LaunchError, match=rf"still runs \(pid {first.pid}"):
        ProcessLauncher(state_dir).start(sim_spec(free_port()))


def test_adopt_verifies_pid_and_start_time(state_dir: Path, cleanup: list[int]) -> None:
    handle = ProcessLauncher(state_dir).start(sim_spec(free_port()))
    cleanup.append(handle.pid)
    fresh = ProcessLauncher(state_dir)  # a restarted fleetd
    record = fresh.read_record()
    assert record is not None
    adopted = fresh.adopt(record)
    assert adopted is not None
    assert adopted.adopted
    assert adopted.pid == handle.pid
    assert fresh.is_alive(adopted)
    assert fresh.exit_code(adopted) is None
    # Same pid, other start time: a reused pid, not our engine.
    assert fresh.adopt(replace(record, start_time=record.start_time - 100)) is None
    # Another process entirely.
    assert fresh.adopt(replace(record, pid=os.getpid())) is None


def test_adopted_engine_exit_is_seen_through_the_pidfd(state_dir: Path, cleanup: list[int]) -> None:
    handle = ProcessLauncher(state_dir).start(sim_spec(free_port()))
    cleanup.append(handle.pid)
    fresh = ProcessLauncher(state_dir)
    record = fresh.read_record()
    assert record is not None
    adopted = fresh.adopt(record)
    assert adopted is not None
    fresh.signal_stop(adopted, graceful=True)
    assert fresh.wait(adopted, timeout_s=STOP_WAIT_S)
    assert not fresh.is_alive(adopted)
    assert fresh.exit_code(adopted) is None  # not our child: unknown


def test_detach_keeps_the_engine_and_its_record(state_dir: Path, cleanup: list[int]) -> None:
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(sim_spec(free_port()))
    cleanup.append(handle.pid)
    launcher.detach(handle)
    assert is_running(handle.pid)
    assert launcher.read_record() is not None


def test_release_leaves_another_engines_record_alone(state_dir: Path, cleanup: list[int]) -> None:
    launcher = ProcessLauncher(state_dir)
    handle = launcher.start(exit_spec(0))
    assert launcher.wait(handle, timeout_s=10)
    record = launcher.read_record()
    assert record is not None
    other = EngineHandle(key="other", record=replace(record, pid=record.pid + 1), adopted=True)
    launcher.release(other)
    assert launcher.read_record() == record
    launcher.release(handle)
    assert launcher.read_record() is None


def test_corrupt_record_names_the_file(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "engine.pid").write_text("{not json")
    with pytest.raises(RecordError, match=r"engine\.pid: not valid JSON"):
        ProcessLauncher(state_dir).read_record()
    (state_dir / "engine.pid").write_text('{"pid": 1}')
    with pytest.raises(RecordError, match=r"missing key 'start_time'"):
        ProcessLauncher(state_dir).read_record()


def test_record_round_trips() -> None:
    record = EngineRecord(
        pid=12,
        start_time=1.5,
        argv=("vllm", "serve"),
        spec_hash="abc",
        port=8098,
        mode=LaunchMode.DOCKER,
        container_name="vllm-dsv4",
        host="127.0.0.1",
        served_model_name="dsv4s",
        recipe_hash="r",
        launched_at="2026-09-29T10:00:00+00:00",
        container_id="f00",
    )
    assert EngineRecord.from_json(record.to_json(), "x") == record


def test_spec_hash_changes_with_argv_and_env() -> None:
    spec = sim_spec(8000)
    assert spec_hash(spec) == spec_hash(sim_spec(8000))
    assert spec_hash(spec) != spec_hash(replace(spec, env={"A": "1"}))
    assert spec_hash(spec) != spec_hash(replace(spec, argv=(*spec.argv, "--x")))


# ----------------------------------------------------------------------------------------
# ContainerLauncher with a fake docker CLI
# ----------------------------------------------------------------------------------------


@pytest.fixture
def fake_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    runtime = FakeRuntime(tmp_path, monkeypatch)
    yield runtime
    runtime.cleanup()


def container_spec(port: int, *flags: str, name: str = "vllm-test") -> LaunchSpec:
    return LaunchSpec(
        mode=LaunchMode.DOCKER,
        argv=(
            "docker",
            "run",
            "--name",
            name,
            "--shm-size=16g",
            "-e",
            "DSV4_LOGITS_ROW_CHUNK=64",
            "sim-image",
            *sim_argv(port, *flags, ready_after_s=0.2),
        ),
        env={"DSV4_LOGITS_ROW_CHUNK": "64"},
        host="127.0.0.1",
        port=port,
        served_model_name="sim-model",
        container_name=name,
    )


def test_container_start_runs_detached_and_follows_logs_and_exit(
    fake_docker: FakeRuntime, state_dir: Path
) -> None:
    launcher = ContainerLauncher(state_dir, "docker")
    handle = launcher.start(container_spec(free_port()))
    try:
        calls = fake_docker.calls()
        run = next(c for c in calls if c[0] == "run")
        assert run[:2] == ["run", "--detach"]
        assert "--shm-size=16g" in run
        assert calls[0][:4] == ["inspect", "--type", "container", "--format"]
        # The followers are long-running helpers started in the background.
        wait_until(
            lambda: (
                {("logs", "--follow", "vllm-test"), ("wait", "vllm-test")}
                <= {tuple(c) for c in fake_docker.calls()}
            ),
            10,
            "logs -f and wait helpers",
        )
        record = launcher.read_record()
        assert record is not None
        assert record.container_name == "vllm-test"
        assert record.container_id == fake_docker.container("vllm-test")["id"]
        assert handle.pid == fake_docker.container("vllm-test")["pid"]
        assert launcher.is_alive(handle)
        wait_until(
            lambda: "Application startup complete." in launcher.log_path.read_text(),
            10,
            "container output copied into engine.log",
        )
        launcher.signal_stop(handle, graceful=True)
        assert ["kill", "--signal", "INT", "vllm-test"] in fake_docker.calls()
        assert launcher.wait(handle, timeout_s=10)
        assert launcher.exit_code(handle) == 0
        assert not any(c[0] == "stop" for c in fake_docker.calls())
        wait_until(lambda: "Shutting down" in launcher.log_path.read_text(), 5, "shutdown line")
    finally:
        launcher.release(handle)
    assert launcher.read_record() is None


def test_container_firm_stop_signals_and_kill_is_the_runtimes_stop(
    fake_docker: FakeRuntime, state_dir: Path
) -> None:
    launcher = ContainerLauncher(state_dir, "docker")
    handle = launcher.start(container_spec(free_port(), "--sim-ignore-signals"))
    try:
        # The engine ignores TERM only once it has set its handlers (before its first line):
        # a TERM sent earlier, on a loaded machine, ends it and proves nothing.
        wait_until(
            lambda: "vLLM API server version" in launcher.log_path.read_text(),
            10,
            "the engine's first line (its signal handlers set)",
        )
        launcher.signal_stop(handle, graceful=False)
        assert ["kill", "--signal", "TERM", "vllm-test"] in fake_docker.calls()
        assert not launcher.wait(handle, timeout_s=0.3)
        assert not any(c[0] == "stop" for c in fake_docker.calls())
        launcher.kill(handle)
        assert ["stop", "-t", "5", "vllm-test"] in fake_docker.calls()
        assert launcher.wait(handle, timeout_s=10)
        assert launcher.exit_code(handle) == 137
    finally:
        launcher.release(handle)


def test_container_stale_stopped_one_is_removed_first(
    fake_docker: FakeRuntime, state_dir: Path
) -> None:
    launcher = ContainerLauncher(state_dir, "docker")
    first = launcher.start(
        replace(container_spec(free_port()), argv=(*container_spec(1).argv[:8], "true"))
    )
    assert launcher.wait(first, timeout_s=10)
    launcher.release(first)
    second = launcher.start(container_spec(free_port()))
    try:
        calls = fake_docker.calls()
        # plain rm: removes a stopped container, refuses a running one (no SIGKILL)
        assert ["rm", "vllm-test"] in calls and not any("--force" in c for c in calls)
        assert calls.index(["rm", "vllm-test"]) < max(
            i for i, c in enumerate(calls) if c[0] == "run"
        )
    finally:
        launcher.kill(second)
        launcher.wait(second, timeout_s=10)
        launcher.release(second)


def test_container_running_without_a_record_is_refused_then_adoptable(
    fake_docker: FakeRuntime, state_dir: Path, tmp_path: Path
) -> None:
    spec = container_spec(free_port())
    other = ContainerLauncher(tmp_path / "other-state", "docker")
    handle = other.start(spec)
    try:
        launcher = ContainerLauncher(state_dir, "docker")
        with pytest.raises(LaunchError, match="already running"):
            launcher.start(spec)
        adopted = launcher.adopt_running(spec)
        assert adopted is not None
        assert adopted.adopted
        assert adopted.record.container_id == handle.record.container_id
        wait_until(
            lambda: any(c[:3] == ["logs", "--follow", "--since"] for c in fake_docker.calls()),
            10,
            "logs -f --since for the adopted container",
        )
        launcher.detach(adopted)
        # Adoption by record checks the container id too.
        record = launcher.read_record()
        assert record is not None
        assert launcher.adopt(replace(record, container_id="someone-else")) is None
        again = launcher.adopt(record)
        assert again is not None
        launcher.detach(again)
    finally:
        other.kill(handle)
        other.wait(handle, timeout_s=10)
        other.release(handle)


def test_container_spec_must_be_a_run_line(fake_docker: FakeRuntime, state_dir: Path) -> None:
    spec = replace(container_spec(free_port()), argv=("docker", "create", "x"))
    with pytest.raises(LaunchError, match="must be `<runtime> run"):
        ContainerLauncher(state_dir).start(spec)
    with pytest.raises(LaunchError, match="container_name"):
        ContainerLauncher(state_dir).start(replace(spec, container_name=None))


def test_missing_runtime_is_a_clear_error(state_dir: Path) -> None:
    launcher = ContainerLauncher(state_dir, "podman", binary="/nonexistent/podman")
    with pytest.raises(LaunchError, match="podman is not installed"):
        launcher.start(replace(container_spec(free_port()), mode=LaunchMode.PODMAN))


def test_inspect_of_a_missing_container_is_none(fake_docker: FakeRuntime, state_dir: Path) -> None:
    assert ContainerLauncher(state_dir).inspect("nothing-here") is None


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("abc123 true 0 4242 false\n", ("abc123", True, 0, 4242, False)),
        ("abc123 false 137 0 true", ("abc123", False, 137, 0, True)),
    ],
)
def test_parse_inspect(output: str, expected: tuple[str, bool, int, int, bool]) -> None:
    state = parse_inspect(output)
    got = (state.container_id, state.running, state.exit_code, state.pid, state.oom_killed)
    assert got == expected


@pytest.mark.parametrize(
    "output", ["", "abc true 0", "abc maybe 0 1 false", "abc true x 1 false", "abc true 0 1"]
)
def test_parse_inspect_rejects_garbage(output: str) -> None:
    with pytest.raises(LauncherError, match="unexpected container inspect output"):
        parse_inspect(output)


def test_unknown_runtime_is_refused(state_dir: Path) -> None:
    with pytest.raises(ValueError, match="docker or podman"):
        ContainerLauncher(state_dir, "lxc")


def test_start_time_is_read_since_boot_not_from_the_wall_clock(tmp_path: Path) -> None:
    """A stepped clock moves psutil's create_time (it adds btime); ticks since boot do not."""
    from serving.runtime.engine_record import process_start_time

    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S", "1", "4242", "4242"] + ["0"] * 15 + [str(123_456 * ticks // 100)] + ["0"] * 30
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text("4242 (vllm (serve) x) " + " ".join(fields) + "\n")
    assert process_start_time(4242, proc_root=tmp_path) == pytest.approx(1234.56, abs=0.01)
    assert process_start_time(4243, proc_root=tmp_path) is None


def test_an_unusable_record_refuses_a_start_rather_than_risk_two_engines(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "engine.pid").write_text("{not json")
    with pytest.raises(LaunchError, match=r"engine\.pid: not valid JSON.*an engine may still run"):
        ProcessLauncher(state_dir).start(sim_spec(free_port()))
    assert (
        not (state_dir / "engine.log").exists()
        or "launch" not in (state_dir / "engine.log").read_text()
    )


def test_an_unopenable_log_is_a_launch_error_before_anything_is_spawned(state_dir: Path) -> None:
    (state_dir / "engine.log").mkdir(parents=True)  # a directory where the log file goes
    before = {p.pid for p in psutil.process_iter()}
    port = free_port()
    with pytest.raises(LaunchError, match=r"cannot open .*engine\.log"):
        ProcessLauncher(state_dir).start(sim_spec(port))
    # This launch's engine, by its port: other xdist workers start engines meanwhile.
    spawned = [
        p
        for p in psutil.process_iter(["cmdline"])
        if p.pid not in before
        and "serving.sim.engine" in (command := " ".join(p.info["cmdline"] or []))
        and f" --port {port} " in f" {command} "
    ]
    assert spawned == []
    assert not (state_dir / "engine.pid").exists()


def test_an_oom_killed_container_says_so_in_the_log(
    fake_docker: FakeRuntime, state_dir: Path
) -> None:
    """The runtime's OOMKilled verdict lands in engine.log, where the crash classifier reads."""
    launcher = ContainerLauncher(state_dir, "docker")
    handle = launcher.start(container_spec(free_port()))
    try:
        record_path = fake_docker.state / "container-vllm-test.json"
        data = json.loads(record_path.read_text())
        data["oom_killed"] = True  # what the kernel's OOM killer leaves in the runtime's state
        record_path.write_text(json.dumps(data))
        os.kill(int(data["pid"]), signal.SIGKILL)
        assert launcher.wait(handle, timeout_s=10)
        assert launcher.exit_code(handle) == 137
        log = launcher.log_path.read_text()
        assert "vllm-test was OOMKilled" in log
        from serving.runtime.classify import CrashClass, classify_exit

        assert classify_exit(log.splitlines()[-20:], 137, None) is CrashClass.OOM_KILLED
    finally:
        launcher.release(handle)
