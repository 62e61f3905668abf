"""schemathesis against ``/openapi.json`` of a live simulated fleetd: generated requests for
every route never get a 5xx, and every answer matches the schema (status code, media type,
body). Driven through Hypothesis directly, one operation after another, with the schema
read from the running daemon."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tests.support.fleetd import Fleetd, start_fleetd, stop_all

# Endless streams: a generated request would wait on them forever.
STREAMS = r"^/api/v1/(stream|serving/logs/(follow|stream))$"
# Each run draws new examples (no database): 6 for each of some 60 operations took about a
# minute on a loaded 2-core machine; 15 took 160 s there, past the test's timeout.
EXAMPLES_PER_OPERATION = 6

# A diagnostic answers when it is done; the schema allows hours of it. A generated
# ``minutes`` of 600 outlives the client timeout once a fuzzed stop has freed the
# cards, then replays as a quick 409 while it still runs: Hypothesis calls that flaky.
# How long a diagnostic may run is not what this test checks.
RUN_LENGTH_FIELDS = ("minutes", "seconds", "stress_s")
# A simulated reboot ends the engine and waits for the bring-up's start lock: at load 10 one
# outlived a 30-s client timeout, then replayed quickly (Hypothesis: "unreliable"). The
# answer's shape is what is checked here, not its speed.
CALL_TIMEOUT_S = 90
SHORTEST_S = 0.01


def short_runs(case: Any) -> None:
    """Cap a generated run length in a JSON body (the other fields stay as generated)."""
    body = getattr(case, "body", None)
    if isinstance(body, dict):
        for field in RUN_LENGTH_FIELDS:
            value = body.get(field)
            if isinstance(value, int | float) and not isinstance(value, bool):
                body[field] = min(value, SHORTEST_S)


# A fuzzed ``canary run {"deep": true}`` runs the deep round: at the default depths (up to
# 128k tokens of simulated prefill) it outlived the client timeout and replayed as a quick
# 409 ("unreliable"). One short depth keeps the round's answer, not its length, under test.
QUICK_DEEP_ROUND = "[canary]\ndepths = [2000]\ndeep_interval_h = 0\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleetd]:
    tmp = tmp_path_factory.mktemp("fuzz")
    config = tmp / "fleet.toml"
    config.write_text(QUICK_DEEP_ROUND)
    daemon = start_fleetd(tmp, tmp / "state", config=config)
    try:
        yield daemon
    finally:
        stop_all([daemon])


@pytest.mark.slow(seconds=10)
# pytest-timeout's signal raises inside Hypothesis, which then reports an "unreliable" case
# instead of the timeout: a limit this run never nears.
@pytest.mark.timeout(400)
def test_every_route_answers_within_its_schema(live: Fleetd) -> None:
    # Imported here: every xdist worker collects this file, one runs it (0.13 s of CPU each).
    import schemathesis
    from schemathesis import checks

    # The bar: no 5xx, and every answer (status, media type, body) as the schema
    # says. Whether the simulation accepts every value its loose body schema allows is not.
    chosen = [
        checks.not_a_server_error,
        checks.status_code_conformance,
        checks.content_type_conformance,
        checks.response_schema_conformance,
    ]
    # Read as every test reads the daemon (its deadline stretched under load: a loaded
    # machine took over schemathesis' 10 s to build the schema), then handed over.
    document = live.get("/openapi.json").json()
    schema = schemathesis.openapi.from_dict(document).exclude(path_regex=STREAMS)
    headers = {"Authorization": f"Bearer {live.token}"}
    failures: list[str] = []
    tested: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        tested.append(operation.label)

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        def check(case: Any) -> None:
            short_runs(case)
            case.call_and_validate(
                base_url=live.url, headers=headers, timeout=CALL_TIMEOUT_S, checks=chosen
            )

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # schemathesis' FailureGroup
            inner = getattr(exc, "exceptions", ())
            said = "; ".join(f"{type(e).__name__}: {e}" for e in inner) or str(exc)
            failures.append(f"{operation.label}: {str(exc)[:500]} [{said[:1500]}]")
    assert len(tested) >= 15, tested
    assert not failures, "\n\n".join(failures)


def test_a_run_id_past_the_databases_integers_is_422_not_500(live: Fleetd) -> None:
    """The fuzz found it: SQLite's integers end at 2**63-1, the route's did not."""
    for path in ("/api/v1/bench/562859959629926115655632814080", "/api/v1/bench/0"):
        assert live.get(path).status_code == 422, path
    stop = live.post("/api/v1/bench/562859959629926115655632814080/stop")
    assert stop.status_code == 422
