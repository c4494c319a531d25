"""How ``make test`` shares the test files among its pytest-xdist workers (``--dist loadfile``).

xdist's own ``loadfile`` sends whole files to the workers in order of their number of tests,
so a long file with few tests (an end-to-end one, the promtool unit tests) could start last
and keep one worker busy while the others had finished. :class:`WeightedFileScheduling`
keeps ``loadfile``'s rule (a file runs whole in one worker, its module fixtures set up once)
with two changes:

- the heaviest work goes first (longest-processing-time first: whatever is left at the end
  is short, so the workers end together), by :data:`SECONDS`, the seconds each unit took a
  worker in one measured run (``--durations``/``--junitxml``; only their order matters, and
  a file missing from it counts :data:`SECONDS_PER_TEST` a test);
- the cases of a test named in :data:`SPREAD` are units of their own, spread over the
  workers (each is long, and independent of the rest of its file).

A worker holding one long unit still gets a second one (xdist runs a test only once it knows
the next): the lightest waiting unit then, so that two long units never queue on one worker
while another is free. ``tests/conftest.py`` installs it (``pytest_xdist_make_scheduler``).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]  # no py.typed

#: Tests whose parametrized cases are each their own unit: each runs promtool on one
#: unit-test file (the SLO ones evaluate every rule each minute over days: minutes each).
SPREAD = (
    "tests/monitoring/test_rules.py::test_promtool_unit_tests",
    "tests/monitoring/test_rules_two_replicas.py::test_every_shipped_promtool_test_passes_for_two_replicas",
)
#: A case of a SPREAD test missing from SECONDS.
SECONDS_PER_SPREAD_CASE = 30.0
#: A test of a file missing from SECONDS.
SECONDS_PER_TEST = 0.3
#: A worker whose pending units are estimated to take longer than this gets the lightest
#: waiting unit as its next one, not the heaviest.
BUSY_SECONDS = 10.0

_RULES = "tests/monitoring/test_rules.py::test_promtool_unit_tests"
#: Worker seconds per unit in one run of the suite (the heaviest ones; 2 cores shared with
#: other work, so about three times a quiet machine's).
SECONDS: dict[str, float] = {
    f"{_RULES}[slo.test.yml]": 341,
    f"{_RULES}[slo_month.test.yml]": 314,
    f"{_RULES}[slo_leak.test.yml]": 243,
    f"{_RULES}[exporter.test.yml]": 238,
    f"{_RULES}[node.test.yml]": 63,
    f"{_RULES}[blockchain.test.yml]": 49,
    f"{_RULES}[consensus_health.test.yml]": 45,
    f"{_RULES}[probe.test.yml]": 44,
    f"{_RULES}[network.test.yml]": 43,
    f"{_RULES}[stall.test.yml]": 38,
    f"{_RULES}[hostile.test.yml]": 36,
    # every promtool unit-test file again for an HA pair, in one run: when its cases are one
    # per file, SPREAD spreads them (SECONDS_PER_SPREAD_CASE each)
    "tests/monitoring/test_rules_two_replicas.py": 2 * 1545,
    "tests/deploy/test_helm.py": 514,
    "tests/model/test_node_answers.py": 436,
    "tests/e2e/test_cli.py": 425,
    "tests/e2e/test_alerts.py": 181,
    "tests/e2e/test_ha_pair.py": 150,
    "tests/simulator/test_openapi.py": 148,
    "tests/poll/test_node_answers_sockets.py": 129,
    "tests/e2e/test_hostile_node.py": 125,
    "tests/web/test_server_fuzz.py": 116,
    "tests/expose/test_render_generated.py": 103,
    "tests/poll/test_state_file_guard.py": 97,
    "tests/monitoring/test_mixin.py": 87,
    "tests/model/test_chain_status_readers.py": 84,
    "tests/e2e/test_lag_and_reorgs.py": 81,
    "tests/e2e/test_consensus_alerts.py": 77,
    "tests/e2e/test_soak.py": 76,
    "tests/deploy/test_wheel.py": 76,
    "tests/deploy/test_live_config.py": 75,
    "tests/docs/test_site.py": 74,
    "tests/config/test_config_secrets.py": 74,
    "tests/e2e/test_one_page_per_incident.py": 65,
    "tests/e2e/test_notifications.py": 65,
    "tests/test_build_info.py": 63,
    "tests/e2e/test_victoriametrics.py": 63,
    "tests/e2e/test_live_reload.py": 61,
    "tests/web/test_landing.py": 57,
    "tests/e2e/test_demo.py": 56,
    "tests/e2e/test_cycle_failures.py": 50,
    "tests/e2e/test_probe.py": 50,
    "tests/web/test_status_page_vs_rules.py": 48,
    "tests/web/test_server.py": 47,
    "tests/e2e/test_probe_prometheus.py": 46,
    "tests/docs/test_readme.py": 45,
    "tests/web/test_status_page.py": 44,
    "tests/test_callers.py": 40,
    "tests/model/test_fast_block_hash.py": 38,
    "tests/deploy/test_workflows.py": 35,
}


def unit_of(nodeid: str) -> str:
    """The work unit of a test: the test itself for a case of a SPREAD test, else its file."""
    if any(nodeid.startswith(f"{test}[") for test in SPREAD):
        return nodeid
    return nodeid.split("::", 1)[0]


def estimate(unit: str, tests: int) -> float:
    """The seconds a unit of ``tests`` tests is expected to take a worker."""
    if unit in SECONDS:
        return SECONDS[unit]
    if "::" in unit:
        return SECONDS_PER_SPREAD_CASE
    return tests * SECONDS_PER_TEST


class WeightedFileScheduling(LoadFileScheduling):  # type: ignore[misc]  # untyped base
    """``--dist loadfile``, heaviest units first and the SPREAD tests' cases spread."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _pending_seconds(self, node: Any) -> float:
        """What the units a worker holds are estimated to take still."""
        left = 0.0
        for unit, tests in self.assigned_work.get(node, {}).items():
            pending = sum(1 for done in tests.values() if not done)
            left += estimate(unit, len(tests)) * pending / len(tests)
        return left

    def _assign_work_unit(self, node: Any) -> None:
        """Give the worker the heaviest waiting unit, or the lightest when it is busy."""
        weights = {unit: estimate(unit, len(tests)) for unit, tests in self.workqueue.items()}
        if self._pending_seconds(node) > BUSY_SECONDS:
            chosen = min(weights, key=weights.__getitem__)
        else:
            chosen = max(weights, key=weights.__getitem__)
        self.workqueue.move_to_end(chosen, last=False)
        super()._assign_work_unit(node)
