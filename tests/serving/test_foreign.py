"""Who holds the engine's port or cards: the runtime CLIs (a fake docker on PATH, a
recorded /proc tree), a container's recipe-hash label, and the grouping of holders into
"the profile's cards" (refuse) and "elsewhere" (warn)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from daemon.engine.preflight import drift_refusal, foreign_refusals, scan_foreign
from hwcheck.model import DeviceHolder, card_of_device
from serving.profiles import Profile, ProfileSet
from serving.recipe.build import build_launch
from serving.recipe.recipe import recipe_from_table
from serving.runtime.container_launcher import ContainerLauncher
from serving.runtime.foreign import ContainerRef, StopOutcome
from serving.runtime.foreign_containers import RuntimeContainers
from serving.runtime.launchers import EngineDrifted
from serving.runtime.states import Drift
from tests.support.engine_helpers import FakeRuntime, sim_argv
from tests.support.fleetd import free_port, wait_until

CONTAINER_ID = "ab" * 32


def run_container(docker: FakeRuntime, name: str, *options: str) -> str:
    """``docker run -d`` a sleeping container; its id."""
    argv = ["docker", "run", "-d", "--name", name, *options, "sim-image", "sleep", "600"]
    subprocess.run(argv, check=True, capture_output=True, timeout=30)
    return str(docker.container(name)["id"])


def remove_container(docker: FakeRuntime, name: str) -> None:
    docker.cleanup()
    (docker.state / f"container-{name}.json").unlink()


@pytest.fixture
def docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeRuntime]:
    fake = FakeRuntime(tmp_path, monkeypatch)
    yield fake
    fake.cleanup()


def proc_tree(root: Path, cgroups: dict[int, str]) -> Path:
    for pid, line in cgroups.items():
        (root / str(pid)).mkdir(parents=True)
        (root / str(pid) / "cgroup").write_text(line + "\n")
    return root


def only_docker(name: str) -> str | None:
    return "docker" if name == "docker" else None


def test_a_pid_is_mapped_to_its_container_through_its_cgroup(
    docker: FakeRuntime, tmp_path: Path
) -> None:
    container_id = run_container(docker, "trainer", "-p", "127.0.0.1:9000:8000")
    proc = proc_tree(
        tmp_path / "proc",
        {
            100: f"0::/system.slice/docker-{container_id}.scope",
            200: "0::/user.slice/user-1000.slice/session-3.scope",
        },
    )
    probe = RuntimeContainers(("docker", "podman"), proc_root=proc, which=only_docker)
    assert probe.container_of_pid(100) == ContainerRef(
        "docker", container_id, "trainer", "sim-image"
    )
    assert probe.container_of_pid(200) is None  # a bare process
    assert probe.container_of_pid(300) is None  # gone
    assert probe.container_publishing(9000) == ContainerRef(
        "docker", container_id, "trainer", "sim-image"
    )
    assert probe.container_publishing(9001) is None


def test_stop_is_sigint_by_kill_signal_never_stop_time_or_rm(
    docker: FakeRuntime, tmp_path: Path
) -> None:
    container_id = run_container(docker, "trainer")
    ref = ContainerRef("docker", container_id, "trainer", "sim-image")
    outcome = RuntimeContainers(which=only_docker).stop(ref, 7.0)
    assert outcome == StopOutcome(ref, (("docker", "kill", "--signal", "SIGINT", "trainer"),), True)
    assert not docker.container("trainer")["running"]
    used = {call[0] for call in docker.calls()}
    assert used <= {"run", "ps", "inspect", "kill"}, used  # no stop --time, no rm -f
    failed = RuntimeContainers(which=only_docker).stop(
        ContainerRef("docker", "x", "nosuch", "?"), 1.0
    )
    assert not failed.stopped and "No such object" in failed.detail


# A container process that ignores the signals named, once its handlers are in place.
IGNORING = (
    "import pathlib, signal, sys, time\n"
    "for name in sys.argv[2:]:\n"
    "    signal.signal(getattr(signal, name), signal.SIG_IGN)\n"
    "pathlib.Path(sys.argv[1]).write_text('ready')\n"
    "time.sleep(600)\n"
)


def run_ignoring(docker: FakeRuntime, tmp_path: Path, name: str, *signals: str) -> ContainerRef:
    ready = tmp_path / f"{name}.ready"
    argv = ["docker", "run", "-d", "--name", name, "sim-image", sys.executable, "-c", IGNORING]
    subprocess.run([*argv, str(ready), *signals], check=True, capture_output=True, timeout=30)
    wait_until(ready.exists, 10, f"{name} ignoring {signals}")
    return ContainerRef("docker", str(docker.container(name)["id"]), name, "sim-image")


def test_sigterm_follows_when_sigint_is_ignored(docker: FakeRuntime, tmp_path: Path) -> None:
    ref = run_ignoring(docker, tmp_path, "deaf-to-int", "SIGINT")
    outcome = RuntimeContainers(which=only_docker).stop(ref, 0.5)
    assert outcome.stopped, outcome
    assert outcome.commands == (
        ("docker", "kill", "--signal", "SIGINT", "deaf-to-int"),
        ("docker", "kill", "--signal", "SIGTERM", "deaf-to-int"),
    )


def test_a_container_that_ignores_both_signals_is_refused_never_killed(
    docker: FakeRuntime, tmp_path: Path
) -> None:
    ref = run_ignoring(docker, tmp_path, "stubborn", "SIGINT", "SIGTERM")
    outcome = RuntimeContainers(which=only_docker).stop(ref, 0.3)
    assert not outcome.stopped
    assert [command[3] for command in outcome.commands] == ["SIGINT", "SIGTERM"]
    assert "still running after SIGINT then SIGTERM (0.3 s each): not killed" in outcome.detail
    assert docker.container("stubborn")["running"]  # still there: nothing killed it
    kills = [call for call in docker.calls() if call[0] == "kill"]
    assert [call[call.index("--signal") + 1] for call in kills] == ["SIGINT", "SIGTERM"]
    assert not [call for call in docker.calls() if call[0] in ("stop", "rm")]


def test_a_container_by_the_recipes_name_is_adopted_only_with_its_recipe_hash(
    docker: FakeRuntime, tmp_path: Path
) -> None:
    recipe = recipe_from_table(
        {
            "mode": "docker",
            "image": "sim-image",
            "command": list(sim_argv(free_port())[:4]),
            "model": "/models/sim",
            "shm_size": "16g",
            "container_name": "vllm-test",
        },
        "test",
    )
    spec = build_launch(recipe, port=free_port())
    run_container(docker, "vllm-test", "--label", "cmpfleet.recipe-hash=someone-elses")
    launcher = ContainerLauncher(tmp_path / "state", "docker")
    with pytest.raises(EngineDrifted) as drifted:
        launcher.adopt_running(spec)
    assert (drifted.value.container_name, drifted.value.recipe_hash) == (
        "vllm-test",
        "someone-elses",
    )
    remove_container(docker, "vllm-test")
    run_container(docker, "vllm-test")  # started by hand: no label at all
    with pytest.raises(EngineDrifted) as unlabelled:
        launcher.adopt_running(spec)
    assert unlabelled.value.recipe_hash == ""
    remove_container(docker, "vllm-test")
    run_container(docker, "vllm-test", "--label", f"cmpfleet.recipe-hash={spec.recipe_hash}")
    handle = launcher.adopt_running(spec)
    assert handle is not None and handle.adopted
    launcher.detach(handle)


@pytest.mark.parametrize(
    ("device", "card"),
    [
        ("/dev/nvidia0", 0),
        ("/dev/nvidia13", 13),
        ("/dev/nvidiactl", None),
        ("/dev/nvidia-uvm", None),
    ],
)
def test_card_of_device(device: str, card: int | None) -> None:
    assert card_of_device(device) == card


@dataclass
class ProbeStandIn:
    """The runtime as a scan sees it: containers by pid (the ``ContainerProbe`` boundary)."""

    by_pid: dict[int, ContainerRef] = field(default_factory=dict)

    def container_of_pid(self, pid: int) -> ContainerRef | None:
        return self.by_pid.get(pid)

    def container_publishing(self, port: int) -> ContainerRef | None:
        return None

    def stop(self, container: ContainerRef, timeout_s: float) -> StopOutcome:
        raise AssertionError("a scan never stops anything")


def holder(pid: int, device: str, name: str = "python3", cmdline: str = "") -> DeviceHolder:
    return DeviceHolder(pid, name, device, cmdline)


SIX = recipe_from_table(
    {"command": ["vllm", "serve"], "model": "m", "port": 0, "gpus": "0,1,2,3,4,5"}, "six"
)
ALL = recipe_from_table({"command": ["vllm", "serve"], "model": "m", "port": 0}, "all")
TRAINER = ContainerRef("docker", "c1", "trainer", "pytorch:2.6")


@pytest.mark.parametrize(
    ("recipe", "held", "blocking", "elsewhere"),
    [
        # A process on card 7 does not refuse a profile on cards 0-5; it does an 8-card one.
        (SIX, [holder(7, "/dev/nvidia7")], [], ["card 7"]),
        (ALL, [holder(7, "/dev/nvidia7")], ["card 7"], []),
        # Control nodes only: which card is unknown, so it warns.
        (
            ALL,
            [holder(8, "/dev/nvidiactl"), holder(8, "/dev/nvidia-uvm")],
            [],
            ["/dev/nvidia-uvm, /dev/nvidiactl"],
        ),
        # One process, several nodes: one holder, the profile's cards named.
        (
            SIX,
            [holder(9, "/dev/nvidiactl"), holder(9, "/dev/nvidia2"), holder(9, "/dev/nvidia7")],
            ["card 2"],
            [],
        ),
        (ALL, [holder(9, "/dev/nvidia2"), holder(9, "/dev/nvidia7")], ["cards 2, 7"], []),
        # Allowed ones are never foreign (ours never reach the scan: the host leaves them out).
        (
            ALL,
            [
                holder(2, "/dev/nvidia0", "nvidia-persistenced"),
                holder(3, "/dev/nvidia0", "Xorg"),
            ],
            [],
            [],
        ),
    ],
)
def test_holders_on_the_profiles_cards_block_others_warn(
    recipe: object, held: list[DeviceHolder], blocking: list[str], elsewhere: list[str]
) -> None:
    scan = scan_foreign(
        recipe,  # type: ignore[arg-type]
        holders=held,
        allowed=["Xorg"],
        probe=ProbeStandIn(),
        rig_cards_ids=[],
        port_is_ours=False,
    )
    assert [h.what for h in scan.cards] == blocking
    assert [h.what for h in scan.elsewhere] == elsewhere


def test_a_refusal_names_a_container_by_name_and_image_and_a_process_by_its_command() -> None:
    held = [
        holder(10, "/dev/nvidia1", cmdline="python3 train.py --hf-token hf_abc"),
        holder(11, "/dev/nvidia2", cmdline="python3 serve.py"),
    ]
    scan = scan_foreign(
        SIX,
        holders=held,
        allowed=[],
        probe=ProbeStandIn({10: TRAINER}),
        rig_cards_ids=[],
        port_is_ours=False,
    )
    assert scan.containers() == [TRAINER]
    (refusal,) = foreign_refusals(SIX, scan)
    assert (refusal.code, refusal.blocking) == ("gpus_held", True)
    assert refusal.message == (
        "the profile's cards are held: container trainer (image pytorch:2.6, docker) holds "
        "card 1; pid 11 (python3 serve.py) holds card 2 (`--stop-foreign` stops a foreign "
        "container (SIGINT, then SIGTERM by docker|podman kill --signal; never SIGKILL); "
        "stop it yourself: fleetd never signals a process it did not start)"
    )


def test_a_drift_explains_what_to_do() -> None:
    a = recipe_from_table({"command": ["vllm", "serve"], "model": "a"}, "a")
    b = recipe_from_table({"command": ["vllm", "serve"], "model": "b"}, "b")
    profiles = ProfileSet([Profile("a", a, "[a]"), Profile("b", b, "[b]")], "a")
    b_hash = profiles.get("b").recipe_hash
    drift = Drift(
        4242,
        "cmpfleet-engine",
        b_hash,
        profiles.get("a").recipe_hash,
        "http://127.0.0.1:8098",
        "docker",
    )
    refusal = drift_refusal(drift, profiles, "a")
    assert refusal.code == "engine_drift"
    assert refusal.message.startswith(
        f"container cmpfleet-engine (pid 4242) at http://127.0.0.1:8098 runs recipe {b_hash[:12]}"
    )
    assert refusal.message.endswith(
        "`fleetctl serve b` serves it as it is, or `fleetctl start --stop-foreign` stops it "
        "and starts 'a'"
    )
    hand_made = Drift(
        77, None, "", profiles.get("a").recipe_hash, "http://127.0.0.1:8098", "process"
    )
    message = drift_refusal(hand_made, profiles, "a").message
    assert "runs recipe no cmpfleet.recipe-hash label" in message
    assert message.endswith("stop it (`kill -INT 77`, vLLM's graceful stop), then start")
