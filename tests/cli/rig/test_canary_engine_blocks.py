"""``fleetctl canary status`` with several engines (issue 42): one block per engine, its
name first, the worst exit code of all; with one engine the one unnamed block as before."""

from __future__ import annotations

from typing import Any

from daemon.cli.rig.canary import engine_blocks, exit_code

PASS = [{"name": "copy_fidelity", "result": "pass"}]
FAIL = [{"name": "copy_fidelity", "result": "fail"}]
SIGNATURES = [{"name": "spec_decode_oob", "this_hour": 1, "last_24h": 2}]


def test_one_engine_is_one_unnamed_block() -> None:
    document: dict[str, Any] = {"canaries": PASS, "log_signatures": SIGNATURES, "history": []}
    assert engine_blocks(document) == [(None, PASS, SIGNATURES)]
    one = {**document, "engines": [{"engine": "low", "canaries": PASS}]}
    assert engine_blocks(one) == [(None, PASS, SIGNATURES)]


def test_several_engines_are_one_named_block_each_in_order() -> None:
    document: dict[str, Any] = {
        "canaries": PASS,
        "log_signatures": SIGNATURES,
        "engines": [
            {"engine": "low", "canaries": PASS, "log_signatures": SIGNATURES},
            {"engine": "high", "canaries": FAIL},
        ],
    }
    blocks = engine_blocks(document)
    assert blocks == [("low", PASS, SIGNATURES), ("high", FAIL, [])]
    assert max(exit_code(canaries) for _, canaries, _ in blocks) == 2
