"""The shared wording: ids with their samples, locations, verdicts, truncation."""

from __future__ import annotations

from ftaudit.verifier.findings import Location, Report, Severity, Violation
from ftaudit.verifier.render.describe import (
    first_violations,
    hidden_text,
    id_groups,
    ids_text,
    location_text,
    rule_status,
    seconds_text,
    summarize,
)
from tests.verifier_render.reports import MISSING, REPLAYED, rule


def test_id_groups_pair_each_run_of_ids_with_its_samples() -> None:
    assert id_groups([17, 18, 19, 40], [1201, 1202, 1203, 5]) == [
        "17..19 (samples 1201..1203)",
        "40 (sample 5)",
    ]


def test_id_groups_break_where_samples_stop_counting_up() -> None:
    # ids consecutive but samples are not: each pair must stay exact
    assert id_groups([0, 1, 2], [10, 11, 50]) == ["0..1 (samples 10..11)", "2 (sample 50)"]


def test_id_groups_without_samples_group_ids_only() -> None:
    assert id_groups([5, 6, 7, 9], []) == ["5..7", "9"]


def test_ids_text_cuts_long_lists_and_counts_all_ids() -> None:
    ids = tuple(range(0, 40, 2))  # 20 runs of one id each
    v = Violation("FT004", Severity.ERROR, "m", ids=ids, id_count=500)
    text = ids_text(v)
    assert text is not None
    assert text.startswith("0, 2, 4, 6, 8, 10, 12, 14, ...")
    assert text.endswith("(500 ids in all)")


def test_ids_text_none_without_ids() -> None:
    assert ids_text(REPLAYED) is None


def test_location_names_every_known_field_in_a_fixed_order() -> None:
    loc = Location(instance="tail", cell=1, step=3, attempt=0, segment="a.parquet")
    assert location_text(loc) == "step 3, attempt 0, cell 1, instance tail, segment a.parquet"
    assert location_text(Location()) == ""


def test_rule_status_warnings_fail_only_when_strict() -> None:
    warn = rule("FT005", "sample-exactly-once", REPLAYED)
    assert rule_status(warn, strict=False) == "warn"
    assert rule_status(warn, strict=True) == "fail"
    assert rule_status(rule("FT004", "w", MISSING), strict=False) == "fail"
    assert rule_status(rule("FT001", "l"), strict=True) == "pass"


def test_headline_states_verdict_and_counts(failing: Report, passing: Report) -> None:
    assert summarize(passing, strict=False).headline() == "verified: all 2 rules hold"
    assert summarize(failing, strict=False).headline() == (
        "FAILED: 12 errors, 1 warning in 1 of 3 rules (FT004)"
    )
    assert summarize(failing, strict=True).headline() == (
        "FAILED (strict): 12 errors, 1 warning in 2 of 3 rules (FT004, FT005)"
    )


def test_headline_of_an_empty_selection_does_not_claim_success() -> None:
    assert "nothing verified" in summarize(Report("/r", ()), strict=False).headline()


def test_first_violations_show_errors_before_warnings_and_count_the_rest() -> None:
    report = Report(
        "/r",
        (
            rule("FT005", "sample-exactly-once", REPLAYED, REPLAYED),
            rule("FT004", "witness-exactly-once", MISSING, MISSING, MISSING),
        ),
    )
    shown, hidden = first_violations(report, 2)
    assert [v.severity for _, v in shown] == [Severity.ERROR, Severity.ERROR]
    assert hidden_text(hidden) == "... and 3 more: FT004 1 error; FT005 2 warnings"


def test_seconds_text_is_short() -> None:
    assert seconds_text(0.0004) == "0.4 ms"
    assert seconds_text(0.25) == "250 ms"
    assert seconds_text(3.21) == "3.2 s"
