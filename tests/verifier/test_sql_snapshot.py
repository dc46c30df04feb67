"""The SQL the views define and the rules run is a public surface too: a snapshot makes every
change to it a deliberate diff (style guide §5).

Regenerate with ``FTAUDIT_UPDATE_SNAPSHOT=1 pytest tests/verifier/test_sql_snapshot.py``
and review the diff of ``sql_snapshot.json``.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ftaudit.eventlog.events import BUILTIN_EVENTS
from ftaudit.eventlog.registry import default_registry
from ftaudit.synth import synthesize
from ftaudit.verifier import verify
from ftaudit.verifier.history import collect
from ftaudit.verifier.session import Session
from tests.support.synth_runs import small_synth

SNAPSHOT = Path(__file__).with_name("sql_snapshot.json")


def _one_line(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def _user_types() -> set[str]:
    builtin = {e.model_fields["type"].default for e in BUILTIN_EVENTS}
    return {t.name for t in default_registry} - builtin


def _sql_now(runs: Sequence[Path]) -> dict[str, dict[str, list[str]]]:
    """Every view's definition, and every query a full verification and the report's
    history run over ``runs``, by label (the session's chokepoint sees them all; a rule
    skips a query whose rows it knows it would not judge, so a run with resumes and
    checkpoints shows those)."""
    queries: dict[str, set[str]] = defaultdict(set)
    views: dict[str, list[str]] = {}
    for run in runs:
        views = _record(run, queries)
    return {
        "views": views,
        "queries": {label: sorted(sqls) for label, sqls in sorted(queries.items())},
    }


def _record(run: Path, queries: dict[str, set[str]]) -> dict[str, list[str]]:
    """The views of ``run``'s session; the queries verifying it runs added to ``queries``."""
    with Session.open(run) as session:
        views = {
            r["view_name"]: [_one_line(r["sql"])]
            for r in session.rows(
                "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
            )
            if r["view_name"] not in _user_types()  # other tests may register their own
        }
        real_query, real_rows, real_batches = session.query, session.rows, session.batches

        def recording(sql: str, params: Sequence[Any] = (), *, label: str = "") -> Any:
            queries[label or "(unlabelled)"].add(_one_line(sql))
            return real_query(sql, params, label=label)

        def recording_rows(
            sql: str, params: Sequence[Any] = (), *, label: str = "", **kw: Any
        ) -> Any:
            queries[label or "(unlabelled)"].add(_one_line(sql))  # also one skipped by needs
            return real_rows(sql, params, label=label, **kw)

        def recording_batches(
            sql: str, params: Sequence[Any] = (), *, label: str = "", **kw: Any
        ) -> Any:
            queries[label or "(unlabelled)"].add(_one_line(sql))
            return real_batches(sql, params, label=label, **kw)

        # the session runs SQL in three ways (Arrow tables, Arrow batches, and rows read
        # straight from DuckDB)
        session.query = recording  # type: ignore[method-assign]
        session.rows = recording_rows  # type: ignore[method-assign]
        session.batches = recording_batches  # type: ignore[method-assign]
        # every event type "held": a query left unasked for a type without rows is run too
        session.holds = lambda event_type: True  # type: ignore[method-assign]
        verify(session)
        collect(session)
    return views


def test_the_sql_matches_the_snapshot(good_run: Path, tmp_path: Path) -> None:
    resumed = synthesize(tmp_path / "run", small_synth(12, restarts=1, checkpoint_every=4))
    # replicas that differ: FT006 compares checksums tensor by tensor only where a point's differ
    diverged = synthesize(tmp_path / "diverged", small_synth(12, bug="checksum_mismatch"))
    now = _sql_now([good_run, resumed.run_dir, diverged.run_dir])
    if os.environ.get("FTAUDIT_UPDATE_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    stored = json.loads(SNAPSHOT.read_text())
    for part in ("views", "queries"):
        changed = sorted(set(stored[part]) ^ set(now[part])) or sorted(
            k for k in now[part] if now[part][k] != stored[part][k]
        )
        assert not changed, f"{part} changed: {changed[:10]} (see this module's docstring)"
