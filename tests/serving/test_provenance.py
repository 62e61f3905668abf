"""What build ran: image inspect (docker and podman), /version, labels, the command's output."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

import pytest

from daemon.engine.builds import capture_build
from serving.recipe.recipe import preset_recipe
from serving.runtime.foreign_containers import RuntimeContainers
from serving.runtime.provenance import (
    BuildFacts,
    ProvenanceError,
    build_name,
    output_text,
    parse_image_inspect,
    parse_version,
)
from serving.settings import ServingSettings

DOCKER = json.dumps(
    [
        {
            "Id": "sha256:" + "a" * 64,
            "RepoTags": ["dsv4-a100:cuda133"],
            "RepoDigests": ["ghcr.io/x/dsv4-a100@sha256:" + "b" * 64],
            "Config": {"Labels": {"dsv4.patch-series": "0001-0023", "other": "y"}},
        }
    ]
)
PODMAN = json.dumps(
    [
        {
            "Id": "c" * 64,
            "Digest": "sha256:" + "d" * 64,
            "RepoDigests": [],
            "Labels": {"dsv4.patch-series": "0001-0008"},
        }
    ]
)


def test_docker_and_podman_inspect() -> None:
    docker = parse_image_inspect(DOCKER)
    assert docker.image_id == "sha256:" + "a" * 64
    assert docker.digests == ("ghcr.io/x/dsv4-a100@sha256:" + "b" * 64,)
    assert docker.labels["dsv4.patch-series"] == "0001-0023"
    podman = parse_image_inspect(PODMAN)
    assert podman.image_id == "sha256:" + "c" * 64
    assert podman.digests == ("sha256:" + "d" * 64,)
    assert podman.labels == {"dsv4.patch-series": "0001-0008"}


@pytest.mark.parametrize("text", ["", "[]", '[{"RepoTags": []}]', "not json"])
def test_inspect_garbage_is_a_provenance_error(text: str) -> None:
    with pytest.raises(ProvenanceError):
        parse_image_inspect(text)


def test_version_and_output() -> None:
    assert parse_version({"version": "0.11.0"}) == "0.11.0"
    assert parse_version({"version": ""}) is None
    assert parse_version(["0.11"]) is None
    assert output_text("  v0.11-23-gabc\n") == "v0.11-23-gabc"
    assert output_text("x" * 5000).endswith("...")


def test_a_build_is_its_facts_and_a_new_digest_is_a_new_build() -> None:
    one = BuildFacts("sha256:r", "img:tag", "sha256:1", "img@sha256:1", "0.11", {"p": "1"})
    same = BuildFacts("sha256:r", "img:tag", "sha256:1", "img@sha256:1", "0.11", {"p": "1"},
                      notes=("ignored",))  # fmt: skip
    rebuilt = BuildFacts("sha256:r", "img:tag", "sha256:2", "img@sha256:2", "0.11", {"p": "1"})
    assert one.key == same.key != rebuilt.key
    assert len(one.key) == 64
    name = build_name(one.key, "repo@sha256:" + "e" * 64, "0.11")
    assert name == f"build {one.key[:8]} (repo@sha256:{'e' * 12}, 0.11)"


class Probe:
    """The runtime and host as ``capture_build`` sees them (what a test scripts)."""

    def __init__(self, inspect: str | None = DOCKER, output: tuple[bool, str] = (True, "")) -> None:
        self.inspect = inspect
        self.output = output
        self.asked: list[tuple[str, ...]] = []

    def image_of_container(self, runtime: str, name: str) -> str | None:
        self.asked.append(("container", runtime, name))
        return "sha256:" + "a" * 64

    def inspect_image(self, runtime: str, image: str) -> str | None:
        self.asked.append(("image", runtime, image))
        return self.inspect

    def command_output(self, argv: Sequence[str], timeout_s: float) -> tuple[bool, str]:
        self.asked.append(("command", *argv))
        return self.output


def version(url: str) -> tuple[str | None, str]:
    return "0.11.0", ""


def test_a_container_launch_records_the_image_it_runs_and_the_named_labels() -> None:
    recipe = preset_recipe("dsv4-flash-pp4-dspark").model_copy(
        update={"mode": "docker", "image": "dsv4-a100:cuda133"}
    )
    probe = Probe()
    serving = ServingSettings(provenance_labels=["dsv4.patch-series", "absent"])
    facts = capture_build(
        recipe, "sha256:r", "http://e", probe, serving, container_name="eng", version_of=version
    )
    # The image the container runs (its ID), not the tag: the tag may be rebuilt since.
    assert probe.asked[:2] == [
        ("container", "docker", "eng"),
        ("image", "docker", "sha256:" + "a" * 64),
    ]
    assert facts.image == "dsv4-a100:cuda133"
    assert facts.image_digest == "ghcr.io/x/dsv4-a100@sha256:" + "b" * 64
    assert facts.labels == {"dsv4.patch-series": "0001-0023"}
    assert facts.engine_version == "0.11.0"
    assert facts.notes == ()


def test_a_bare_process_records_the_provenance_command_and_says_why_facts_are_missing() -> None:
    recipe = preset_recipe("dsv4-flash-pp4-dspark").model_copy(
        update={"mode": "process", "image": None, "command": ("vllm", "serve")}
    )
    serving = ServingSettings(provenance_command=["git", "-C", "/opt/vllm", "describe"])
    probe = Probe(output=(True, "v0.11.0-23-gdeadbee\n"))
    facts = capture_build(recipe, "sha256:r", "http://e", probe, serving, version_of=version)
    assert facts.provenance_output == "v0.11.0-23-gdeadbee"
    assert facts.image is None
    failing = Probe(output=(False, "`git` exited 128: not a repository"))
    missing = capture_build(
        recipe,
        "sha256:r",
        "http://e",
        failing,
        serving,
        version_of=lambda url: (None, "GET /version failed"),
    )
    assert missing.notes == (
        "provenance_command: `git` exited 128: not a repository",
        "GET /version failed",
    )


def test_the_command_runs_as_an_argv_list_with_a_timeout() -> None:
    containers = RuntimeContainers(runtimes=())
    assert containers.command_output([sys.executable, "-c", "print('v1 ; echo x')"], 10) == (
        True,
        "v1 ; echo x\n",
    )
    ok, why = containers.command_output([sys.executable, "-c", "import sys; sys.exit(3)"], 10)
    assert (ok, why) == (False, f"`{sys.executable}` exited 3: ")
    ok, why = containers.command_output([sys.executable, "-c", "import time; time.sleep(5)"], 0.5)
    assert not ok and "took longer than 0.5 s" in why
    assert containers.command_output([], 1) == (False, "no command")
