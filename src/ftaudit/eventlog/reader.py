"""Checking a run's segments (listed by :mod:`ftaudit.eventlog.rundir`) and reading them
back as typed records."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.errors import CorruptSegmentError, SegmentVanishedError, UnknownEventTypeError
from ftaudit.eventlog.envelope import ENVELOPE_COLUMNS, ENVELOPE_SCHEMA
from ftaudit.eventlog.layouts import SCHEMA_VERSION, missing_column
from ftaudit.eventlog.pool import in_order
from ftaudit.eventlog.registry import EventRegistry, default_registry
from ftaudit.eventlog.rundir import SegmentFile, SegmentListing, list_segments, relisting
from ftaudit.eventlog.segment import SegmentMeta, file_digest

if TYPE_CHECKING:
    from ftaudit.eventlog.record import Record

UNREADABLE = (OSError, ValueError, pa.ArrowException)
"""What reading a damaged Parquet file can raise: I/O and Arrow errors, and ``ValueError``
(``UnicodeDecodeError`` among them) from a footer whose names are no longer UTF-8."""


def open_parquet(source: Path | bytes, metadata: pq.FileMetaData | None = None) -> pq.ParquetReader:
    """Arrow's Parquet reader over a file's path or its bytes, footer parsed once (not at
    all with ``metadata``: the file's footer parsed before, 18% of a small segment's read).

    Not :class:`pyarrow.parquet.ParquetFile`: for each file it opens, that builds a map of
    nested column paths in Python (about 0.1 ms for a small segment's 30-40 columns,
    paid by every segment of a run of 100,000), and it parses a path as a URI. Raises
    what :data:`UNREADABLE` names.
    """
    reader = pq.ParquetReader()
    # bytes already in memory need no read-ahead; the other options are ParquetFile's
    pre_buffer = not isinstance(source, bytes)
    where = pa.BufferReader(source) if isinstance(source, bytes) else str(source)
    reader.open(where, pre_buffer=pre_buffer, arrow_extensions_enabled=True, metadata=metadata)
    return reader


def unreadable(path: Path, exc: BaseException, reason: str) -> CorruptSegmentError:
    """The error for a segment that could not be read: :class:`SegmentVanishedError` when it
    no longer exists (removed after it was listed), else a :class:`CorruptSegmentError`."""
    if isinstance(exc, FileNotFoundError):
        return SegmentVanishedError(path, "removed after the run was listed")
    return CorruptSegmentError(path, f"{reason} ({exc})")


@dataclass(frozen=True)
class SegmentInfo:
    path: Path
    meta: SegmentMeta
    num_rows: int
    schema: pa.Schema
    content_digest: str | None = None
    """The digest of the file's bytes as read when its footer was checked (``""``: no digest
    slot in its footer); None when the check did not hash it (FT001 then reads the file)."""


@dataclass(frozen=True)
class RunScan:
    """The sealed segments of a run, and temp files left by flushes that a crash cut short."""

    run_dir: Path
    segments: tuple[SegmentInfo, ...]
    torn: tuple[Path, ...]

    @property
    def files(self) -> list[str]:
        return [str(s.path) for s in self.segments]


@dataclass(frozen=True)
class Footer:
    """What reading a segment's footer gives, before any check (:func:`read_footer`)."""

    metadata: dict[bytes, bytes] | None
    num_rows: int
    schema: pa.Schema
    """Without the footer's key-values (digests differ per file)."""
    content_digest: str | None
    """As :attr:`SegmentInfo.content_digest`."""
    parsed: pq.FileMetaData
    """The parsed footer (a follower keeps it for its statistics; a scan drops it)."""
    opened: pq.ParquetReader | None = None
    """With ``digest``: the reader over the file's bytes, its footer parsed: the rows can
    be decoded with it (:func:`~ftaudit.eventlog.load.read_segment`), with no second read
    of the file and no second open."""


class FooterChecks:
    """What the segments of one scan share: equal schemas interned (so memory does not grow
    with the number of segments), and the column checks done once per (schema, types)."""

    def __init__(self) -> None:
        self._schemas: dict[tuple[str, ...], list[pa.Schema]] = {}
        self._checked: set[tuple[int, tuple[str, ...], int]] = set()

    def intern(self, schema: pa.Schema, types: tuple[str, ...]) -> pa.Schema:
        """The schema equal to ``schema`` seen before (with the segment's ``types``), else
        ``schema``: compared in Arrow's C++, hashing a wide schema costs 0.1 ms a segment."""
        seen = self._schemas.setdefault(types, [])
        for known in seen:
            if known.equals(schema):
                return known
        seen.append(schema)
        return schema

    def columns(self, path: Path, meta: SegmentMeta, schema: pa.Schema) -> None:
        """The envelope and built-in payload columns are there with their types."""
        # ``schema`` is interned: its id names its shape; the version says which columns
        # of its types a segment must hold
        key = (id(schema), meta.types, meta.schema_version)
        if key in self._checked:
            return
        try:
            # a damaged footer can leave names that are no longer UTF-8: refuse the file
            # here, by name, not later from inside DuckDB's read of the stream
            schema.names  # noqa: B018 (decoding them is the check)
        except UnicodeDecodeError:
            raise CorruptSegmentError(path, "a column name in its footer is not UTF-8") from None
        for field in ENVELOPE_SCHEMA:
            i = schema.get_field_index(field.name)
            if i < 0 or not schema.field(i).type.equals(field.type):
                raise CorruptSegmentError(
                    path, f"envelope column {field.name!r} missing or mistyped"
                )
        _check_payload_types(path, meta, schema)
        self._checked.add(key)


def read_footer(file: SegmentFile, *, digest: bool = False) -> Footer:
    """Read a listed segment's footer (with ``digest``: the whole file, its bytes hashed
    too); nothing is checked yet (:func:`check_footer`). Raises what :func:`unreadable`
    makes. I/O, hashing and Arrow's footer parse release the GIL: scans run this on
    threads (:func:`scan_run`).
    """
    path = file.path
    content: str | None = None
    try:
        if digest:
            with open(path, "rb") as f:
                data = f.read()
            content = file_digest(data) or ""
            parquet = open_parquet(data)
        else:
            parquet = open_parquet(path)
        md = parquet.metadata
        schema = parquet.schema_arrow.remove_metadata()
        return Footer(md.metadata, md.num_rows, schema, content, md, parquet if digest else None)
    except UNREADABLE as exc:
        raise unreadable(path, exc, "not a readable Parquet file") from None


def check_segment(
    file: SegmentFile, checks: FooterChecks | None = None, *, digest: bool = False
) -> SegmentInfo:
    """The checked segment of :func:`checked_footer`, without its footer."""
    return checked_footer(file, checks, digest=digest)[0]


def checked_footer(
    file: SegmentFile, checks: FooterChecks | None = None, *, digest: bool = False
) -> tuple[SegmentInfo, Footer]:
    """Read a listed segment's footer and check it against its name, writer and schema;
    the checked segment and its footer as read (a follower keeps the parsed footer:
    parsing it again for its statistics cost a poll a millisecond per new segment).

    Raises :class:`CorruptSegmentError` naming the file (:class:`SegmentVanishedError` when
    it was removed after it was listed); :func:`list_segments` has already refused links
    and other non-files. ``checks`` shares schemas and column checks across calls. With
    ``digest``, the file is read whole once and its bytes hashed as well
    (:attr:`SegmentInfo.content_digest`: FT001 then reads nothing more).
    """
    footer = read_footer(file, digest=digest)
    return check_footer(file, footer, checks), footer


def check_footer(
    file: SegmentFile, footer: Footer, checks: FooterChecks | None = None
) -> SegmentInfo:
    """Check a segment's footer (:func:`read_footer`) against its name, writer and schema
    (see :func:`check_segment`)."""
    path, writer_dir = file.path, file.writer
    checks = checks if checks is not None else FooterChecks()
    try:
        meta = SegmentMeta.from_metadata(footer.metadata)  # the footer's own values, digest too
    except (KeyError, ValueError, UnicodeDecodeError):
        raise CorruptSegmentError(
            path, "foreign Parquet file: no ftaudit segment metadata"
        ) from None
    if meta.schema_version > SCHEMA_VERSION:
        raise CorruptSegmentError(
            path, f"written with schema version {meta.schema_version}, newer than {SCHEMA_VERSION}"
        )
    if (
        meta.writer != writer_dir
        or meta.first_seq != file.first_seq
        or file.last_seq not in (None, meta.last_seq)
    ):
        raise CorruptSegmentError(path, f"name does not match its footer (writer {meta.writer})")
    if file.last_seq is not None and not meta.parts:
        raise CorruptSegmentError(path, "named as a merged segment, but its footer lists no parts")
    if meta.parts and not _parts_cover(meta):
        raise CorruptSegmentError(path, "compacted parts do not cover its sequence range")
    num_rows = footer.num_rows
    if num_rows != meta.last_seq - meta.first_seq + 1:
        raise CorruptSegmentError(
            path, f"holds {num_rows} rows, footer says seq {meta.first_seq}..{meta.last_seq}"
        )
    # the segments of one shape share one schema object: memory does not grow with them
    schema = checks.intern(footer.schema, meta.types)
    checks.columns(path, meta, schema)
    return SegmentInfo(path, meta, num_rows, schema, footer.content_digest)


def _parts_cover(meta: SegmentMeta) -> bool:
    """A compacted segment's parts run from its first to its last seq without gap or overlap."""
    expected = meta.first_seq
    for part in meta.parts:
        if part.first_seq != expected or part.last_seq < part.first_seq:
            return False
        expected = part.last_seq + 1
    return expected == meta.last_seq + 1


def superseded(segments: tuple[SegmentInfo, ...]) -> set[Path]:
    """Segments a compacted segment of their writer holds already (same range, same digest).

    ``ftaudit compact`` puts the compacted segment in place of the first original, then
    removes the others: a compaction cut short leaves those, and readers skip them (their
    events are in the compacted segment, vouched for by the same digests).
    """
    compacted: dict[str, list[SegmentMeta]] = {}
    for info in segments:
        if info.meta.parts:
            compacted.setdefault(info.meta.writer, []).append(info.meta)
    if not compacted:
        return set()
    return {
        info.path
        for info in segments
        if not info.meta.parts
        and info.meta.digest
        and any(_holds(c, info.meta) for c in compacted.get(info.meta.writer, ()))
    }


def _holds(compacted: SegmentMeta, meta: SegmentMeta) -> bool:
    """Whether ``compacted`` lists ``meta``'s range and digest as one of its parts.

    Its parts tile its range (checked with its footer), so only a segment inside that
    range can be one: a follower's window holds a roll's merged segment of 128 parts
    per writer, and its new flushes lie past it (no part walked)."""
    if not compacted.first_seq <= meta.first_seq <= meta.last_seq <= compacted.last_seq:
        return False
    return any(
        (p.first_seq, p.last_seq, p.digest) == (meta.first_seq, meta.last_seq, meta.digest)
        for p in compacted.parts
    )


def digest_problem(info: SegmentInfo) -> str | None:
    """Why a segment's bytes do not match the digest its footer records; None when they do."""
    if not info.meta.digest:
        return "its footer has no content digest, unlike the rest of the run"
    actual = info.content_digest
    if actual is None:  # not hashed when its footer was checked: read it now
        try:
            actual = file_digest(info.path.read_bytes()) or ""
        except OSError as exc:
            return f"it cannot be read ({exc.strerror or exc})"
    if not actual:
        return "its digest cannot be found in its footer"
    if actual != info.meta.digest:
        return f"its bytes hash to {actual[:12]}..., its footer says {info.meta.digest[:12]}..."
    return None


def check_declared_types(path: str | Path, held: Iterable[str | None], meta: SegmentMeta) -> None:
    """Every event type a segment's rows ``held`` is one its footer lists
    (:attr:`SegmentMeta.types`).

    Readers that look at footers only trust that list: an incremental window picks the
    segments that declare checkpoints and resumes by it, the MAC check picks the records
    it checks, and the payload columns are type-checked for the types it names. A footer
    that leaves out a type its rows hold (forged, the digest recomputed) would hide those
    rows from them while a full read saw them: such a segment is unusable, whoever reads it.
    """
    undeclared = sorted({t for t in held if t is not None} - set(meta.types))
    if undeclared:
        raise CorruptSegmentError(
            Path(path),
            f"rows of type {', '.join(map(repr, undeclared))} that its footer does not list "
            f"(it lists {', '.join(meta.types) or 'none'})",
        )


def torn_rows(path: Path) -> int | None:
    """How many events a torn flush's temp file holds when it was written completely (only
    its rename was cut short); None when it was cut short while being written."""
    try:
        return pq.read_metadata(path).num_rows
    except UNREADABLE:
        return None


def _check_payload_types(path: Path, meta: SegmentMeta, schema: pa.Schema) -> None:
    """A built-in event type's columns have the types its model maps to (a retyped one would
    mislead every query and rule), none is unknown to its model (a renamed column, from a
    damaged footer, would read as missing), and none is missing that a segment of its
    schema version holds (``eventlog/layouts.py``: only an older segment lacks a column)."""
    present = set(schema.names)
    for name in meta.types:
        event_type = default_registry.get(name)
        if event_type is None:
            continue  # a user type: the session checks that it is registered
        known = {f.name for f in event_type.arrow_fields}
        prefix = f"{name}."
        for column in schema.names:
            if column.startswith(prefix) and column not in known:
                raise CorruptSegmentError(path, f"column {column!r} is not a field of {name}")
        for want in event_type.arrow_fields:
            i = schema.get_field_index(want.name)
            if i >= 0 and not schema.field(i).type.equals(want.type):
                raise CorruptSegmentError(
                    path, f"column {want.name!r} is {schema.field(i).type}, not {want.type}"
                )
        missing = missing_column(event_type, meta.schema_version, present)
        if missing is not None:
            raise CorruptSegmentError(
                path,
                f"column {missing!r} is missing, but segments of schema version "
                f"{meta.schema_version} hold it",
            )


FOOTERS_AHEAD = 64
"""At most this many footers read ahead of the one being checked (each holds its schema;
the file's bytes are dropped once hashed)."""


def scan_run(
    run_dir: str | os.PathLike[str],
    *,
    listing: SegmentListing | None = None,
    digests: bool = False,
) -> RunScan:
    """List the run and check every segment's footer; raise a one-line error naming the
    first bad file.

    A segment removed between the listing and its reading (a writer's roll, a compaction)
    makes the run be listed again, up to :data:`RELISTS` times: the merged segment that
    holds it is then read instead, and a segment that vanished with nothing holding it is
    a sequence gap for FT001. ``listing``: one the caller made already (it may be stale).
    ``digests``: hash each file's bytes too (what FT001 checks; see :func:`check_segment`).
    """
    given = [listing] if listing is not None else []

    def check() -> tuple[SegmentListing, tuple[SegmentInfo, ...]]:
        current = given.pop() if given else list_segments(run_dir)
        checks = FooterChecks()
        footers = in_order(partial(read_footer, digest=digests), current.files, ahead=FOOTERS_AHEAD)
        return current, tuple(check_footer(f, footer, checks) for f, footer in footers)

    current, segments = relisting(check)
    skip = superseded(segments)
    if skip:
        segments = tuple(s for s in segments if s.path not in skip)
    return RunScan(current.run_dir, segments, current.torn)


def segment_records(
    info: SegmentInfo,
    registry: EventRegistry = default_registry,
    types: frozenset[str] | None = None,
) -> Iterator[Record]:
    """The events of one checked segment as typed records (only ``types`` when given)."""
    # the models, not at import: checking and loading a run builds none (ft-verify's start-up)
    from ftaudit.eventlog.arrow_schema import from_arrow
    from ftaudit.eventlog.record import Envelope, Record

    try:
        table = pq.read_table(info.path)
    except UNREADABLE as exc:
        raise unreadable(info.path, exc, "unreadable") from None
    check_declared_types(info.path, table.column("type").to_pylist(), info.meta)
    if types is not None:
        import pyarrow.compute as pc  # not at import: it costs ft-verify ~30 ms, unused there

        table = table.filter(pc.is_in(table.column("type"), pa.array(sorted(types), pa.string())))
    for row in table.to_pylist():
        event_type = registry.get(row["type"])
        if event_type is None:
            raise UnknownEventTypeError(
                f"{info.path}: event type {row['type']!r} is not registered in this process"
            )
        payload = {
            name: from_arrow(row[event_type.column(name)], ann)
            for name, ann in event_type.fields
            if row.get(event_type.column(name)) is not None
        }
        event = event_type.model.model_validate(
            {"type": row["type"], "step": row["step"], "attempt": row["attempt"], **payload},
            strict=False,
        )
        envelope = Envelope.model_validate({c: row[c] for c in ENVELOPE_COLUMNS})
        yield Record(envelope=envelope, event=event)


def read_records(
    run_dir: str | os.PathLike[str], registry: EventRegistry = default_registry
) -> list[Record]:
    """Every event of a run as typed records, ordered by writer and sequence number."""
    scan = scan_run(run_dir)
    records = [r for info in scan.segments for r in segment_records(info, registry)]
    records.sort(key=lambda r: (r.envelope.writer, r.envelope.seq))
    return records
