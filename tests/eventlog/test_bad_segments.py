"""Unreadable input gives one clear error naming the file; nothing is skipped silently."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ftaudit.errors import CorruptSegmentError, UnusableInputError
from ftaudit.eventlog import EventWriter, Metric, connect, load, read_records, reader, scan_run
from ftaudit.eventlog.rundir import list_segments


def _one_segment(writer: EventWriter, tmp_path: Path) -> Path:
    for i in range(100):
        writer.log(Metric(step=i, attempt=0, values={"i": float(i)}))
    writer.flush()
    (segment,) = (tmp_path / "events").glob("*/*.parquet")
    return segment


def test_truncated_segment(writer: EventWriter, tmp_path: Path):
    segment = _one_segment(writer, tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptSegmentError, match="not a readable Parquet file") as err:
        scan_run(tmp_path)
    assert str(segment) in str(err.value)
    assert "\n" not in str(err.value)


def test_bit_flip_in_the_data_is_reported(writer: EventWriter, tmp_path: Path):
    segment = _one_segment(writer, tmp_path)
    data = bytearray(segment.read_bytes())
    for offset in range(8, 200):  # the first data pages, past the magic bytes
        data[offset] ^= 0xFF
    segment.write_bytes(bytes(data))
    with pytest.raises(UnusableInputError) as err:
        read_records(tmp_path)
    assert str(segment) in str(err.value)


def _rename_column_bytes(segment: Path, name: bytes, damaged: bytes) -> None:
    """Overwrite a column name in the footer's Parquet schema and in its Arrow schema (kept
    base64 among the key-values), as damage to those bytes would, keeping every length."""
    encoded = pq.read_metadata(segment).metadata[b"ARROW:schema"]
    renamed = base64.b64encode(base64.b64decode(encoded).replace(name, damaged))
    data = segment.read_bytes().replace(encoded, renamed)
    segment.write_bytes(data.replace(name, damaged))


def test_column_name_that_is_no_longer_utf8(writer: EventWriter, tmp_path: Path):
    # once refused only from inside DuckDB's read, with a Python traceback in the message
    segment = _one_segment(writer, tmp_path)
    _rename_column_bytes(segment, b"metric.values", b"metric.valu\xffs")
    with pytest.raises(CorruptSegmentError, match="column name in its footer is not UTF-8") as err:
        connect(tmp_path)
    assert str(segment) in str(err.value)
    assert "Traceback" not in str(err.value)


def _flip_data(segment: Path) -> None:
    data = bytearray(segment.read_bytes())
    for offset in range(8, 200):  # the first data pages, past the magic bytes
        data[offset] ^= 0xFF
    segment.write_bytes(bytes(data))


@pytest.mark.parametrize("threads", [0, 2])
def test_the_first_undecodable_segment_in_order_is_reported(
    writer: EventWriter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
):
    """Segments decode on threads where there are cores to spare, a few ahead (two here,
    so the queue refills): a later bad segment may fail first on its thread, yet the
    error names the first in the listing, as when they are read one by one (no thread)."""
    monkeypatch.setattr(load, "DECODE_AHEAD", 2)
    monkeypatch.setattr(load, "DECODE_THREADS", threads)
    for flush in range(6):
        for i in range(100):
            writer.log(Metric(step=flush * 100 + i, attempt=0, values={"i": float(i)}))
        writer.flush()
    segments = [f.path for f in list_segments(tmp_path).files]
    assert len(segments) == 6
    for bad in (segments[5], segments[3]):  # the later one damaged first
        _flip_data(bad)
    with pytest.raises(CorruptSegmentError, match="unreadable") as err:
        connect(tmp_path)
    assert str(err.value).startswith(f"{segments[3]}: ")


def test_the_first_bad_footer_in_order_is_reported(
    writer: EventWriter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Footers are read on threads, ahead of their checks (all six here), and checked in
    listing order: a later segment that cannot be read at all does not hide an earlier one
    whose footer reads but fails its checks, whichever thread finished first."""
    monkeypatch.setattr(reader, "FOOTERS_AHEAD", 8)
    for flush in range(6):
        for i in range(100):
            writer.log(Metric(step=flush * 100 + i, attempt=0, values={"i": float(i)}))
        writer.flush()
    segments = [f.path for f in list_segments(tmp_path).files]
    segments[5].write_bytes(segments[5].read_bytes()[:100])  # unreadable, listed last
    pq.write_table(pa.table({"x": [1]}), segments[2])  # readable, but no ftaudit footer
    with pytest.raises(CorruptSegmentError, match="foreign Parquet file") as err:
        scan_run(tmp_path, digests=True)
    assert str(err.value).startswith(f"{segments[2]}: ")
    segments[2].unlink()  # a hole is FT001's: the unreadable segment is reported next
    with pytest.raises(CorruptSegmentError, match="not a readable Parquet file") as err:
        scan_run(tmp_path)
    assert str(err.value).startswith(f"{segments[5]}: ")


def test_a_renamed_column_is_not_read_as_a_missing_one(writer: EventWriter, tmp_path: Path):
    # a missing column is an older segment's (the model's default applies): a damaged name
    # must not pass for one (fuzz readers: a bit flipped in witness_allocated.sample_indices)
    segment = _one_segment(writer, tmp_path)
    _rename_column_bytes(segment, b"metric.values", b"metric.valuez")
    with pytest.raises(CorruptSegmentError, match=r"'metric\.valuez' is not a field of metric"):
        scan_run(tmp_path)


def test_foreign_parquet_file(writer: EventWriter, tmp_path: Path):
    segment = _one_segment(writer, tmp_path)
    foreign = segment.with_name("000000000100.parquet")
    pq.write_table(pa.table({"x": [1, 2, 3]}), foreign)
    with pytest.raises(CorruptSegmentError, match="foreign Parquet file") as err:
        connect(tmp_path)
    assert str(foreign) in str(err.value)


def test_segment_renamed_into_another_writer_folder(writer: EventWriter, tmp_path: Path):
    segment = _one_segment(writer, tmp_path)
    other = tmp_path / "events" / "someone-else"
    other.mkdir()
    os.rename(segment, other / segment.name)
    with pytest.raises(CorruptSegmentError, match="does not match its footer"):
        scan_run(tmp_path)


def test_symlink_is_refused(writer: EventWriter, tmp_path: Path):
    segment = _one_segment(writer, tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.parquet"
    os.rename(segment, outside)
    segment.symlink_to(outside)
    with pytest.raises(CorruptSegmentError, match="symbolic link"):
        scan_run(tmp_path)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing", "no such run directory"),
        (lambda p: (p / "f").write_text("x") and p / "f", "not a directory"),
        (lambda p: p, "no events/ folder"),
        (lambda p: (p / "events").mkdir() or p, "no event segments"),
    ],
)
def test_not_a_usable_run_directory(tmp_path: Path, make, message: str):
    with pytest.raises(UnusableInputError, match=message):
        scan_run(make(tmp_path))


def test_temp_file_of_a_cut_short_flush_is_listed_not_read(writer: EventWriter, tmp_path: Path):
    segment = _one_segment(writer, tmp_path)
    torn = segment.with_name(f".{segment.name}.999.tmp")
    torn.write_bytes(b"PAR1 half a file")
    scan = scan_run(tmp_path)
    assert scan.torn == (torn,)
    assert len(read_records(tmp_path)) == 100
