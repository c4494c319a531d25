"""The order and grouping in which ``make test``'s workers get the test files
(tests/support/schedule.py): a file stays whole, a SPREAD test's cases are units of their
own, and the heaviest known unit is estimated above any unknown file."""

from __future__ import annotations

from tests.support import schedule

RULES = "tests/monitoring/test_rules.py"


def test_a_file_is_one_unit() -> None:
    assert schedule.unit_of(f"{RULES}::test_alert_metadata[LedgerNodeDown]") == RULES
    assert schedule.unit_of("tests/e2e/test_cli.py::TestX::test_y[a::b]") == "tests/e2e/test_cli.py"


def test_a_spread_tests_cases_are_units_of_their_own() -> None:
    case = f"{RULES}::test_promtool_unit_tests[slo.test.yml]"
    assert schedule.unit_of(case) == case
    # a test whose name only begins like a SPREAD one stays with its file
    assert schedule.unit_of(f"{RULES}::test_promtool_unit_tests_x[a]") == RULES


def test_estimates_order_known_units_before_unknown_ones() -> None:
    slo = f"{RULES}::test_promtool_unit_tests[slo.test.yml]"
    assert schedule.estimate(slo, 1) > schedule.estimate(
        f"{RULES}::test_promtool_unit_tests[new]", 1
    )
    assert (
        schedule.estimate("tests/e2e/test_cli.py", 1) == schedule.SECONDS["tests/e2e/test_cli.py"]
    )
    assert schedule.estimate("tests/test_new.py", 10) == 10 * schedule.SECONDS_PER_TEST
