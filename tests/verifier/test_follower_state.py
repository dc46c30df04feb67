"""What a follower keeps between polls costs what the new segments cost, a window that
outgrew one DuckDB thread gets the session a window of its size would get, and the rows
of new segments are checked before they join the window."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from ftaudit.errors import CorruptSegmentError
from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS
from ftaudit.eventlog.load import conformed_batches, unified_schema
from ftaudit.eventlog.reader import RunScan, digest_problem, scan_run
from ftaudit.eventlog.registry import default_registry
from ftaudit.eventlog.rundir import SegmentFile, SegmentListing, list_segments
from ftaudit.eventlog.shapes import is_runs
from ftaudit.eventlog.type_tables import RunTables
from ftaudit.synth import synthesize
from ftaudit.verifier import incremental
from ftaudit.verifier import session as session_module
from ftaudit.verifier.checksum_digests import ChecksumDigests
from ftaudit.verifier.context import AllocationLog, RunContext
from ftaudit.verifier.heads import CheckpointHeads
from ftaudit.verifier.incremental import HEAD_ONLY, WINDOW_ONLY, FooterCache, Kept, select
from ftaudit.verifier.online import OnlineVerifier
from ftaudit.verifier.rules.counter_log import CounterLog
from ftaudit.verifier.segment_state import NamedBySegment, SegmentFed
from ftaudit.verifier.session import Session
from ftaudit.verifier.validation import ALIGNED, RING_IDS, check_rows, suspect_rows
from tests.support.corrupt import FORGED_RUNS, ID_SETS, forge_digest, load_segment
from tests.support.synth_runs import LOOKBACK

CONFIG = dataclasses.replace(LOOKBACK, steps=24, restarts=0, retries=0, flush_every=1)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize(tmp_path_factory.mktemp("follower") / "run", CONFIG).run_dir


def _threads(session: Session) -> int:
    # fetched to the end: a result left unread holds the connection (DuckDB 2)
    return session.con.execute("SELECT current_setting('threads')").fetchall()[0][0]


def test_a_window_that_outgrew_one_thread_is_opened_on_all_threads(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = FooterCache()
    late, late_window = select(run_dir, 20, cache=cache)
    early, early_window = select(run_dir, 4, cache=cache)
    small = sum(i.num_rows for i in late.segments)
    assert small < sum(i.num_rows for i in early.segments)
    monkeypatch.setattr(session_module, "ONE_THREAD_ROWS", small + 1)
    parts = {"kept": late_window.kept}
    with Session.open(run_dir, scan=late, **parts) as session:
        assert session.one_thread and _threads(session) == 1
        grown = {"kept": early_window.kept}
        # the session's configuration is locked: the grown window needs a new session
        assert not session.move(early, **grown)
        assert session.move(late, **parts)  # unchanged, it still moves along
    with Session.open(run_dir, scan=early, **grown) as session, duckdb.connect() as plain:
        default = plain.execute("SELECT current_setting('threads')").fetchone()[0]
        assert not session.one_thread and _threads(session) == default


def test_a_segment_kept_in_part_counts_the_rows_from_its_window_on(run_dir: Path) -> None:
    # a late window keeps a few rows of a long segment: counted whole, a follower that
    # attached with one thread opened its window again at the writers' first roll
    info = max(scan_run(run_dir).segments, key=lambda i: i.meta.last_seq - i.meta.first_seq)
    first, last, rows = info.meta.first_seq, info.meta.last_seq, info.num_rows
    half = (first + last) // 2
    assert session_module._rows_kept(info, None) == rows
    assert session_module._rows_kept(info, HEAD_ONLY) == 0  # head rows: few
    assert session_module._rows_kept(info, WINDOW_ONLY) == rows
    share = rows * (last - half + 1) // (last - first + 1)
    assert 0 < share < rows
    assert session_module._rows_kept(info, Kept(head_from=0, whole_from=half)) == share
    assert session_module._rows_kept(info, Kept(0, half, last + 5)) == share


class _Counting(FooterCache):
    looked: list[Path]

    def info(self, listed: SegmentFile):  # type: ignore[no-untyped-def]
        self.looked.append(listed.path)
        return super().info(listed)


def test_a_poll_looks_at_no_footer_before_its_window(run_dir: Path) -> None:
    """The data declarations before the window are found among the segments sealed since
    the last poll, not by looking at every older footer again."""
    listing = list_segments(run_dir)
    cache = _Counting()
    cache.looked = []
    last, _ = select(run_dir, 20, listing=listing, cache=cache)
    assert cache.declared  # each writer's segments before the window were looked at once
    cache.looked = []
    scan, _ = select(run_dir, 21, listing=listing, cache=cache)
    # the window's segments, and those that just left it: none from before the last window
    assert set(cache.looked) <= {i.path for i in (*last.segments, *scan.segments)}
    assert len(scan.segments) < len(listing)  # the window is not the whole run
    # a segment that left the listing (a roll merged it) makes the cache look again, once
    writer, files = next(iter(listing.writers.items()))
    rolled = SegmentListing(listing.run_dir, {**listing.writers, writer: files[1:]}, ())
    cache.keep(rolled)
    assert not cache.declared
    again, _ = select(run_dir, 21, listing=rolled, cache=cache)
    want, _ = select(run_dir, 21, listing=rolled)  # a fresh cache
    assert [i.path for i in again.segments] == [i.path for i in want.segments]


def test_a_new_segment_that_breaks_its_model_is_refused_before_it_joins(tmp_path: Path) -> None:
    """A moved window checks the segments sealed since the last poll on their own (not
    among the window's rows): a bad row is named and nothing of its segment is loaded."""
    column = "witness_allocated.witness_ids"

    def forge(bad: Path) -> None:
        table, meta = load_segment(bad)
        values = table.column(column).to_pylist()
        row = next(i for i, v in enumerate(values) if v is not None)
        values[row] = FORGED_RUNS["mismatched"]
        field = table.schema.field(column)
        i = table.schema.get_field_index(column)
        forge_digest(bad, table.set_column(i, field, pa.array(values, field.type)), meta)

    _refused_on_move(
        tmp_path,
        lambda path: column in load_segment(path)[0].column_names,
        forge,
        "witness_ids",
    )


def test_a_new_segment_whose_footer_leaves_out_a_type_is_refused_before_it_joins(
    tmp_path: Path,
) -> None:
    """A moved window checks that each new segment's rows hold only the types its footer
    lists (footer-only readers trust that list): a forged one is named, nothing of it loaded."""
    hidden = "step_end"

    def forge(bad: Path) -> None:
        table, meta = load_segment(bad)
        listed = meta[b"ftaudit.types"].decode().split(",")
        meta[b"ftaudit.types"] = ",".join(t for t in listed if t != hidden).encode()
        forge_digest(bad, table, meta)

    _refused_on_move(
        tmp_path,
        lambda path: hidden in load_segment(path)[1][b"ftaudit.types"].decode().split(","),
        forge,
        f"'{hidden}'.*does not list",
    )


def _refused_on_move(
    tmp_path: Path, holds: Callable[[Path], bool], forge: Callable[[Path], None], why: str
) -> None:
    """Load a window without the newest driver segment that ``holds`` it, ``forge`` that
    segment, and move the window onto it: refused naming the segment and ``why``, with
    the window's rows as they were, and the window still moves without it."""
    run = synthesize(tmp_path / "run", CONFIG).run_dir
    listing = list_segments(run)
    driver = next(w for w in listing.writers if w.startswith("driver."))
    files = listing.writers[driver]
    bad = next(f.path for f in reversed(files) if holds(f.path))
    before = SegmentListing(
        listing.run_dir, {**listing.writers, driver: tuple(f for f in files if f.path != bad)}, ()
    )
    scan, window = select(run, 20, listing=before)
    parts = {"kept": window.kept}
    forge(bad)
    grown, grown_window = select(run, 20, listing=listing)
    with Session.open(run, scan=scan, **parts) as session:
        rows = session.rows("SELECT count(*) AS n FROM events")[0]["n"]
        with pytest.raises(CorruptSegmentError, match=f"{bad.name}.*{why}"):
            session.move(grown, kept=grown_window.kept)
        assert session.rows("SELECT count(*) AS n FROM events")[0]["n"] == rows
        assert session.move(scan, **parts)  # the staged rows are gone: it moves on


def test_rows_kept_in_part_are_the_same_loaded_or_moved_in(run_dir: Path) -> None:
    """What is kept of a segment (``Kept``: some types' rows, all rows from a later one)
    is the same whether a session loads it (a DELETE in DuckDB) or a moved window decodes
    it (an Arrow filter), for several ways of keeping mixed in one move."""
    scan, _ = select(run_dir, 0)
    trainer = next(i.meta.writer for i in scan.segments if not i.meta.writer.startswith("driver"))
    mine = [i for i in scan.segments if i.meta.writer == trainer][:-1]
    ways = [HEAD_ONLY, WINDOW_ONLY, Kept(0, None, 0), Kept(None, 0, 0), Kept(0, 0, 0)]
    kept: dict[str, Kept] = {}
    for i, info in enumerate(mine):
        way = ways[i % len(ways)]
        if i % 2:  # cut inside: whole from the row after its first
            way = Kept(way.head_from, way.window_from, info.meta.first_seq + 1)
        kept[str(info.path)] = way
    # the other writers' segments, whole: the moved window's columns are all there
    first = RunScan(scan.run_dir, tuple(i for i in scan.segments if i not in mine), ())
    rows = "SELECT segment, type, seq FROM events ORDER BY segment, seq"
    with Session.open(run_dir, scan=scan, kept=kept) as loaded:
        want = loaded.rows(rows)
    with Session.open(run_dir, scan=first) as moved:
        assert moved.move(scan, kept=kept)
        assert moved.rows(rows) == want
    assert 0 < len(want) < sum(i.num_rows for i in scan.segments)


def test_a_rule_state_forgets_a_segment_holding_an_attempt_twice(run_dir: Path) -> None:
    """A segment may hold one rank's reading of an attempt twice (a rank that logged it
    again): the state forgets both when the segment leaves, and judges as before it."""
    with Session.open(run_dir) as session:
        ctx = RunContext(session, footers=FooterCache())
        log = ctx.kept(CounterLog)
        want = log.jumps(ctx)
        segment = sorted(session.segments_holding(CounterLog.event_type))[-1]
        log.add(ctx, [segment])  # its rows once more
        log.drop(segment)
        log.add(ctx, [segment])
        assert log.jumps(ctx) == want
        assert want == []  # a valid run: no counter jumped


def _rows_of(run: Path) -> pa.Table:
    scan = scan_run(run)
    return pa.Table.from_batches(
        list(conformed_batches(scan, unified_schema(scan))), unified_schema(scan)
    )


def _forged(rows: pa.Table, column: str, forge: Callable[[Any], Any]) -> pa.Table:
    """``rows`` with the first value of ``column`` that is not NULL forged."""
    values = rows.column(column).to_pylist()
    row = next(i for i, v in enumerate(values) if v is not None)
    values[row] = forge(values[row])
    field = rows.schema.field(column)
    return rows.set_column(rows.schema.get_field_index(column), field, pa.array(values, field.type))


def _outcome(cells: list) -> list:
    (cell, outcome), *rest = cells
    return [(cell, {**outcome, "ranks": ["rolled_back"]}), *rest]


FORGERIES: dict[str, tuple[str, Callable[[Any], Any]]] = {
    **{
        f"{column}:{kind}": (column, lambda _, runs=runs: runs)
        for column in ID_SETS
        for kind, runs in FORGED_RUNS.items()
    },
    "null num_ids": ("witness_allocated.num_ids", lambda _: None),
    "null cells": ("step_end.cells", lambda _: None),
    "short sample_indices": (
        "witness_allocated.sample_indices",
        lambda v: {"starts": v["starts"], "lengths": [*v["lengths"][:-1], v["lengths"][-1] + 1]},
    ),
    "ids past the ring": (
        "witness_snapshot.nonzero_ids",
        lambda _: {"starts": [CONFIG.buffer_size - 1], "lengths": [2]},
    ),
    "rank outcome": ("step_end.cells", _outcome),
    "checksum point": ("trainer_weight_checksum.when", lambda _: "before_step"),
    "writer kind": ("source_kind", lambda _: "scheduler"),
    "writer role": ("source_role", lambda _: "reward"),
}


@pytest.fixture(scope="module")
def honest_rows(run_dir: Path) -> pa.Table:
    return _rows_of(run_dir)


def _judged(rows: pa.Table, con: duckdb.DuckDBPyConnection | None = None) -> str | None:
    """What :func:`check_rows` says of ``rows`` (None: nothing), on ``con`` if given."""
    if con is None:
        with duckdb.connect() as fresh:
            return _judged(rows, fresh)
    # as a follower's poll judges its new rows: in the run's columns, none loaded before
    con.register("_rows", rows)
    con.execute("CREATE OR REPLACE TABLE _incoming AS SELECT * FROM _rows")
    con.unregister("_rows")
    try:
        check_rows(con, default_registry, RunTables(rows.schema, frozenset()), "_incoming")
    except CorruptSegmentError as exc:
        return str(exc)
    except duckdb.Error as exc:  # the session refuses the rows as unreadable
        return str(exc)
    return None


def _rings(rows: pa.Table) -> dict[int, int]:
    """As the session's poll gives them: the largest buffer size of each incarnation."""
    rings: dict[int, int] = {}
    for r in rows.to_pylist():
        size = r["run_started.buffer_size"] if r["type"] == "run_started" else None
        if size is not None:
            rings[r["incarnation"]] = max(size, rings.get(r["incarnation"], size))
    return rings


def test_the_screen_passes_honest_rows(honest_rows: pa.Table) -> None:
    assert _judged(honest_rows) is None
    assert not suspect_rows(honest_rows, default_registry, _rings(honest_rows))


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_the_screen_flags_every_row_the_check_refuses(honest_rows: pa.Table, forgery: str) -> None:
    """A follower's new rows go to :func:`check_rows` (the judge, whose message is
    reported) only where the Arrow screen flags them: it must flag every row the judge
    refuses, for every kind of invariant (an id set, a required field, a count, the ring,
    an enum at any depth, the envelope's identity)."""
    column, forge = FORGERIES[forgery]
    rows = _forged(honest_rows, column, forge)
    assert _judged(rows) is not None, forgery  # a forgery the judge refuses
    assert suspect_rows(rows, default_registry, _rings(rows))


def _value(shape: Any, poison: bool = False) -> Any:
    """A value of ``shape`` its model allows (an id set: one id, ``[0, 1)``); ``poison``:
    the same with an enum or literal value the model does not know at its deepest."""
    if is_runs(shape):
        return {"starts": [0], "lengths": [1]}
    if isinstance(shape, str):
        return {"int": 0, "float": 0.0, "bool": False, "str": "x"}[shape]
    kind = shape[0]
    if kind == "enum":
        return "forged" if poison else shape[2][0]
    if kind == "list":
        return [_value(shape[1], poison)]
    if kind == "map":
        return [(_value(shape[1]), _value(shape[2], poison))]
    return {name: _value(inner, poison and _has_enum(inner)) for name, inner in shape[2]}


def _has_enum(shape: Any) -> bool:
    if isinstance(shape, str):
        return False
    if shape[0] == "enum":
        return True
    if shape[0] in ("list", "map"):
        return _has_enum(shape[-1])
    return any(_has_enum(inner) for _, inner in shape[2])


def _field_forgeries(event_type: Any, ring: int) -> dict[str, dict[str, Any]]:
    """One forgery (payload fields to change) of each invariant of each of ``event_type``'s
    fields that the judge holds: generated from the registry's shapes, so a new type or
    field is covered without a line here."""
    out: dict[str, dict[str, Any]] = {}
    count_field, sets = ALIGNED.get(event_type.name, (None, ()))
    for name, shape, required in event_type.stored:
        key = f"{event_type.name}.{name}"
        if required:
            out[f"{key}:NULL"] = {name: None}
        if is_runs(shape):
            runs = {
                **FORGED_RUNS,
                "null starts": {"starts": None, "lengths": [1]},
                "null lengths": {"starts": [0], "lengths": None},
                "a NULL start": {"starts": [None], "lengths": [1]},
                "a NULL length": {"starts": [0], "lengths": [None]},
            }
            if (event_type.name, name) in RING_IDS:
                runs["past the ring"] = {"starts": [ring], "lengths": [1]}
            for kind, value in runs.items():
                out[f"{key}:{kind}"] = {name: value}
        if _has_enum(shape):
            out[f"{key}:unknown value"] = {name: _value(shape, poison=True)}
        if name in sets:
            out[f"{key}:not num_ids values"] = {count_field: 2}
    return out


def _typed_rows(honest_rows: pa.Table) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
    """The honest ``run_started`` rows (the rings) with every built-in type's columns, and
    of each type one row its model allows (its envelope that of the first honest row)."""
    fields = [f for t in default_registry for f in t.arrow_fields]
    schema = pa.schema(
        [*honest_rows.schema, *(f for f in fields if f.name not in honest_rows.column_names)]
    )
    started = honest_rows.filter(pc.equal(honest_rows["type"], "run_started"))
    base = {n: None for n in schema.names} | {
        n: v for n, v in started.to_pylist()[0].items() if n in ENVELOPE_COLUMNS or n == "filename"
    }
    rows = {
        t.name: base
        | {"type": t.name}
        | {t.column(name): _value(shape) for name, shape, _ in t.stored}
        for t in default_registry
    }
    for name, (count_field, _) in ALIGNED.items():  # each of its id sets holds one id
        rows[name][default_registry[name].column(count_field)] = 1
    kept = [{n: r.get(n) for n in schema.names} for r in started.to_pylist()]
    return pa.Table.from_pylist(kept, schema), rows


def test_the_screen_flags_each_invariant_of_every_field_of_every_type(
    honest_rows: pa.Table,
) -> None:
    """Each invariant the judge holds, forged in each field of each built-in type (a row of
    every type, not only of those a synth run writes): the judge refuses it and the screen
    flags it, and the row unforged passes both (the screen may not be tricked by a column
    typed other than its model's either)."""
    started, rows = _typed_rows(honest_rows)
    rings = _rings(started)
    ring = rings[started["incarnation"][0].as_py()]
    missed = []
    con = duckdb.connect()  # one for all: a connection each cost most of the test's time
    for event_type in default_registry:
        row = rows[event_type.name]
        clean = pa.concat_tables([started, pa.Table.from_pylist([row], started.schema)])
        assert _judged(clean, con) is None, event_type.name
        assert not suspect_rows(clean, default_registry, _rings(clean)), event_type.name
        for forgery, changes in _field_forgeries(event_type, ring).items():
            forged = row | {event_type.column(n): v for n, v in changes.items()}
            table = pa.concat_tables([started, pa.Table.from_pylist([forged], started.schema)])
            if _judged(table, con) is None:
                assert forgery.split(":")[1] == "huge", forgery  # long, but in no ring
                continue
            if not suspect_rows(table, default_registry, _rings(table)):
                missed.append(forgery)
    con.close()
    assert not missed


def test_the_screen_flags_a_column_typed_other_than_its_model(honest_rows: pa.Table) -> None:
    """A footer that leaves a type out escapes the reader's column type check: the screen
    reads a nested enum by its field's name, so a retyped struct goes to the judge."""
    column = "step_end.cells"
    outcome = pa.struct([("errored", pa.bool_()), ("rank_list", pa.list_(pa.string()))])
    retyped = pa.map_(pa.int64(), outcome)
    known = ["normal"]  # a known value, where the model's "ranks" would be
    values = [
        None if v is None else [(k, {"errored": o["errored"], "rank_list": known}) for k, o in v]
        for v in honest_rows.column(column).to_pylist()
    ]
    i = honest_rows.schema.get_field_index(column)
    rows = honest_rows.set_column(i, pa.field(column, retyped), pa.array(values, retyped))
    assert _judged(rows) is not None
    assert suspect_rows(rows, default_registry, _rings(rows))


def _data_identity(run_dir: Path, cache: FooterCache, since: int) -> list[str]:
    """FT008's violation kinds in a follower's poll judging steps ``>= since``."""
    from ftaudit.verifier.anchors import NO_ANCHORS
    from ftaudit.verifier.engine import check_session, select_rules

    scan, window = select(run_dir, since, cache=cache)
    parts = {"kept": window.kept}
    with Session.open(run_dir, scan=scan, **parts) as session:
        report = check_session(
            session, select_rules(["FT008"]), window, None, (), NO_ANCHORS, cache
        )
    return [v.kind for r in report.results for v in r.violations]


def test_a_follower_reads_the_dataset_manifest_once_a_damaged_one_at_every_poll(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest is named by its content's digest, so what a follower found for the
    digest stays its manifest (reading and hashing it cost every poll 5 ms); a manifest
    that could not be read is looked for again, and reported, at each poll."""
    import shutil

    from ftaudit.dataset import manifest as manifest_module

    reads: list[Path] = []
    real = manifest_module.read_manifest

    def counted(path: Any) -> Any:
        reads.append(Path(path))
        return real(path)

    monkeypatch.setattr(manifest_module, "read_manifest", counted)
    cache = FooterCache()
    for since in (8, 12, 16):
        assert _data_identity(run_dir, cache, since) == []
    assert len(reads) == 1, reads
    damaged = shutil.copytree(run_dir, tmp_path / "run")
    (kept,) = (damaged / "manifests").iterdir()
    kept.write_bytes(kept.read_bytes()[:-40])  # its footer cut: no longer Parquet
    cache, reads[:] = FooterCache(), []
    for since in (8, 12):
        assert _data_identity(damaged, cache, since) == ["manifest_unusable"]
    assert len(reads) == 2


def test_a_moved_window_decodes_new_segments_with_the_footers_the_follower_parsed(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower parsed each new segment's footer when it listed it; the window's move
    decodes the segment with that footer (parsing it again cost 18% of a small segment's
    read), and the rows are those of a read that parses it. Past its first poll it reads
    each new segment whole when it lists it: hashed there, and decoded with the reader
    that read its footer (no second read, no second open)."""
    from ftaudit.eventlog import load
    from ftaudit.verifier.online import OnlineVerifier

    cache = FooterCache()
    scan, _ = select(run_dir, 12, cache=cache)
    assert {i.path for i in scan.segments} <= set(cache.metadata)
    assert not cache.opened and all(i.content_digest is None for i in scan.segments)
    schema = unified_schema(scan)
    parsed = pa.Table.from_batches(list(conformed_batches(scan, schema, cache.metadata)), schema)
    fresh = pa.Table.from_batches(list(conformed_batches(scan, schema)), schema)
    assert parsed.equals(fresh)
    whole = FooterCache(read_whole=True)
    scan, _ = select(run_dir, 12, cache=whole)
    assert {i.path for i in scan.segments} <= set(whole.opened)
    assert all(digest_problem(i) is None and i.content_digest for i in scan.segments)
    read = pa.Table.from_batches(list(conformed_batches(scan, schema, whole.footers)), schema)
    assert read.equals(fresh)
    whole.drop_footers()
    assert not whole.opened and not whole.metadata

    given: list[object] = []
    real = load.read_segment

    def spied(info: Any, footer: Any = None, leaves: Any = None) -> pa.Table:
        given.append(footer)
        return real(info, footer, leaves)

    monkeypatch.setattr(load, "read_segment", spied)
    follower = OnlineVerifier(tmp_path / "live", since_step=0)
    moved: list[int] = []

    def poll(step: int) -> None:
        opened = follower._session
        given.clear()
        follower.poll()
        if opened is not None and follower._session is opened:
            moved.append(len(given))
            assert all(isinstance(f, pq.ParquetReader) for f in given), step

    synthesize(tmp_path / "live", CONFIG, after_step=poll)
    follower.close()
    assert sum(moved) > 0  # the window moved, reading new segments, each with its footer


def test_a_follower_keeps_no_parsed_footer_between_polls(tmp_path: Path) -> None:
    """A parsed footer is about 100 KB: a follower that kept every listed segment's grew by
    that per new segment. A poll that judged steps keeps what it derived (each segment's
    checked info and largest step), not the footers; one that judged nothing keeps those
    of the segments sealed since (the next poll decodes them). No footer is parsed twice."""
    from ftaudit.verifier.online import OnlineVerifier

    follower = OnlineVerifier(tmp_path / "live", since_step=0)
    kept: list[int] = []
    parsed_again: list[Path] = []
    real_md = FooterCache.md

    def counted(self: FooterCache, path: Path) -> Any:
        if path not in self.metadata:
            parsed_again.append(path)
        return real_md(self, path)

    def poll(step: int) -> None:
        if follower.poll().judged is not None:
            kept.append(len(follower._cache.metadata) + len(follower._cache.opened))
        assert follower._cache.max_steps, step

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(FooterCache, "md", counted)
        synthesize(tmp_path / "live", CONFIG, after_step=poll)
    report = follower.poll()
    follower.close()
    assert kept and set(kept) == {0}
    assert parsed_again == []
    assert not report.violations


def test_a_moved_window_keeps_history_tables_equal_to_its_views(tmp_path: Path) -> None:
    """A move remakes only the history tables made from the event types whose rows it
    added or removed (a live run's poll adds step ends, a resume a start), and drops
    those it changes at every move (read as their views): after every poll of a run with
    restarts and retries, each kept table holds what its view, made afresh from the
    loaded rows, holds."""
    from ftaudit.verifier.online import OnlineVerifier
    from ftaudit.verifier.views import KEPT, MOVING

    config = dataclasses.replace(LOOKBACK, flush_every=1)
    follower = OnlineVerifier(tmp_path / "run", since_step=0)
    moved: list[int] = []

    def poll(step: int) -> None:
        opened = follower._session
        follower.poll()
        session = follower._session
        if session is None:
            return
        if opened is session:
            moved.append(step)
        # fetchall: a result left unread holds the connection (DuckDB 2)
        ((database,),) = session.con.execute("SELECT current_database()").fetchall()
        view, table = f"{database}.main", "temp.main"
        temporary = session.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE temporary"
        ).fetchall()
        for name in KEPT:
            if (name,) not in temporary:
                assert name in MOVING and opened is session, (step, name)  # moved: a view
                continue
            for a, b in ((table, view), (view, table)):
                differ = session.con.execute(
                    f"SELECT count(*) FROM (SELECT * FROM {a}.{name} EXCEPT ALL "
                    f"SELECT * FROM {b}.{name})"
                ).fetchall()[0][0]
                assert differ == 0, (step, name, a, b)

    synthesize(tmp_path / "run", config, after_step=poll)
    follower.close()
    assert len(moved) > 10


def _held(state: SegmentFed) -> object:
    """What a rule state holds of the window's rows, in a form two states built apart
    compare by (a reading carried past the window is not the window's)."""
    if isinstance(state, NamedBySegment):
        return dict(state.named), {s: dict(c) for s, c in state.of_segment.items()}
    if isinstance(state, CounterLog):
        rows = {k: sorted(rows, key=lambda r: r.seq) for k, rows in state._rows.items()}
        return rows, state._steps
    if isinstance(state, AllocationLog):
        return state.allocations()
    if isinstance(state, CheckpointHeads):
        return state.heads
    if isinstance(state, ChecksumDigests):
        return state.points_of(0, ())
    raise AssertionError(f"{type(state).__name__}: a rule state this test does not compare")


@pytest.mark.parametrize("restarts", [0, 2])
def test_a_kept_rule_state_trimmed_as_its_cut_moves_holds_the_windows_rows(
    tmp_path: Path, restarts: int
) -> None:
    """Writers roll every 3 flushes, so a poll's window mostly begins inside a merged
    segment, a little later at each poll. A follower's rule states forget the rows before
    the new cut (``trim``) instead of taking the segment in again: after every poll each
    holds what a state built from the poll's window holds (resumes move cuts back)."""
    config = dataclasses.replace(LOOKBACK, restarts=restarts, roll_segments=3, flush_every=1)
    online = OnlineVerifier(tmp_path / "run")
    compared, forward = 0, 0
    cuts: dict[type, dict[str, int | None]] = {}

    def after_step(step: int) -> None:
        nonlocal compared, forward
        online.poll()
        session = online._session
        if session is None:
            return
        for make, state in online._cache.states.items():
            if not isinstance(state, SegmentFed):
                continue  # carried across polls, not made of the window's rows
            fresh = make()
            fresh.sync(RunContext(session))
            assert _held(state) == _held(fresh), (step, make.__name__)
            was = cuts.get(make, {})
            forward += sum(
                1 for p, s in state.cut.items() if s is not None and (was.get(p) or 0) < s
            )
            cuts[make] = dict(state.cut)
            compared += 1

    synthesize(tmp_path / "run", config, after_step=after_step)
    assert compared > 100
    assert forward > 20  # the trims this test is about happened


def test_a_follower_keeps_the_footers_of_its_window_not_of_the_runs_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long follower's checked footers follow its window: those of segments the window
    left are let go (at step 99,000 of a 16-cell run they held 340,000 parsed parts of
    merged segments, which Python's cycle collector walked at each full pass), and none
    is read twice, a roll's (which moves every later segment's position) included."""
    reads: Counter[Path] = Counter()
    real = incremental.checked_footer

    def counted(listed: SegmentFile, *args: Any, **kwargs: Any) -> Any:
        reads[listed.path] += 1
        return real(listed, *args, **kwargs)

    monkeypatch.setattr(incremental, "checked_footer", counted)
    config = dataclasses.replace(
        LOOKBACK, steps=90, restarts=0, retries=0, roll_segments=3, flush_every=1
    )
    online = OnlineVerifier(tmp_path / "run")
    held: list[tuple[int, int]] = []  # (footers held, segments listed) after each poll

    def after_step(step: int) -> None:
        if online.poll().judged is not None:
            listed = len(list_segments(tmp_path / "run").files)
            held.append((len(online._cache.infos), listed))

    synthesize(tmp_path / "run", config, after_step=after_step)
    assert len(held) > 60
    late = held[len(held) // 2 :]
    assert max(h for h, _ in late) <= max(h for h, _ in held[: len(held) // 2])  # flat
    assert all(h < listed for h, listed in late)
    assert sum(listed for _, listed in late) > 2 * sum(h for h, _ in late)
    twice = [p.name for p, n in reads.items() if n > 1]
    assert not twice, twice
