"""What both framework tests check of a resume whose loader started its epoch over."""

from __future__ import annotations

from pathlib import Path

import ftaudit
from ftaudit.verifier import verify


def _resumed_positions(run: Path, step: int) -> list[int]:
    """The sample indices incarnation 1 allocated in ``step``."""
    with ftaudit.connect(run) as con:
        return con.execute(
            "SELECT list_sort(flatten(list(generate_series(r.s, r.s + r.l - 1)))) FROM ("
            "SELECT unnest(sample_indices.starts) AS s, unnest(sample_indices.lengths) AS l "
            "FROM witness_allocated WHERE incarnation = 1 AND step = ?) r",
            [step],
        ).fetchall()[0][0]


def restarted_epoch_is_caught(run: Path, *, first_resumed_step: int, per_step: int) -> None:
    """The resumed positions read the epoch's first items again: FT008 names them.

    The stream positions themselves stay contiguous (FT005 has nothing to say), and the
    weights hold exactly the trained samples (FT004 is clean): what is wrong is which
    items those positions read, against the order the sampler declared for the epoch.
    """
    report = verify(run)
    assert not report.passed()
    by_code = {r.code: r for r in report.results}
    ft008 = by_code["FT008"]
    wrong = [v for v in ft008.violations if v.kind == "wrong_item"]
    assert wrong, report.to_dict()
    named = {s for v in wrong for s in v.sample_indices}
    start = first_resumed_step * per_step  # the checkpoint's consumed count
    first = _resumed_positions(run, first_resumed_step)
    assert first == list(range(start, start + per_step)) and set(first) <= named
    assert f"position {start} read item" in " ".join(v.message for v in wrong)
    twice = [v for v in ft008.violations if v.kind == "duplicate_content"]
    assert any("in epoch 0" in v.message for v in twice), report.to_dict()
    assert by_code["FT005"].errors == 0 and by_code["FT004"].errors == 0
