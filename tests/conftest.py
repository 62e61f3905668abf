"""Suite-wide ordering: the longest modules first, so the workers finish together.

``scripts/dev test`` runs the suite under pytest-xdist with ``--dist loadfile``: each module
runs whole on one worker (its module-scoped daemons and browser are shared), and modules
are handed out in collection order. A long module collected last would run alone at the
end while the other workers idle; started first, it overlaps the short ones. The list is
the slowest modules of a measured run (``--durations``); a stale entry costs only balance.
"""

from __future__ import annotations

import pytest

LONGEST_FIRST = (
    "tests/daemon/test_recovery_e2e.py",
    "tests/web/test_dashboard.py",
    "tests/daemon/test_faults_never_blind.py",
    "tests/daemon/test_engine_e2e.py",
    "tests/daemon/test_fleetd.py",
    "tests/cli/test_check.py",
    "tests/daemon/test_profiles_e2e.py",
    "tests/cli/test_contract_surface.py",
    "tests/daemon/test_bad_startup.py",
    "tests/daemon/test_forbidden_moves.py",
    "tests/serving/test_serving_status_e2e.py",
    "tests/daemon/test_start_gate.py",
    "tests/daemon/test_canary_e2e.py",
    "tests/serving/test_supervisor.py",
    "tests/cli/test_bad_peers.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the longest modules to the front, keeping every module's own test order."""
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}

    def module_rank(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(LONGEST_FIRST))

    items.sort(key=module_rank)  # stable: the order within a module and among the rest holds
