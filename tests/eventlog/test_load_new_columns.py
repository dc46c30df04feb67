"""``load.new_columns``: the columns of new segments a loaded table's schema lacks (a
follower's session adds them), None for a column typed otherwise (it opens anew); each
shape is looked at once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ftaudit.eventlog import scan_run
from ftaudit.eventlog.load import FILENAME, conformed_batches, new_columns, unified_schema
from ftaudit.eventlog.reader import SegmentInfo
from ftaudit.synth import SynthConfig, synthesize


def test_new_columns_are_those_the_schema_lacks_and_none_for_another_type(
    tmp_path: Path,
) -> None:
    run = synthesize(tmp_path / "run", SynthConfig(steps=6, restarts=0, retries=0)).run_dir
    scan = scan_run(run)
    schema = unified_schema(scan)
    shapes = {id(info.schema) for info in scan.segments}
    assert len(shapes) < len(scan.segments)  # segments of one shape share a schema
    assert new_columns(scan, schema) == []
    payload = next(n for n in schema.names if "." in n)  # a type's payload column
    field = schema.field(payload)
    assert new_columns(scan, schema.remove(schema.get_field_index(payload))) == [field]
    other = pa.string() if field.type != pa.string() else pa.int64()
    retyped = schema.set(schema.get_field_index(payload), pa.field(payload, other))
    assert new_columns(scan, retyped) is None
    assert new_columns(scan, schema.remove(schema.get_field_index(FILENAME))) == []


def test_trimmed_batches_hold_what_each_segment_trim_keeps(tmp_path: Path) -> None:
    """``conformed_batches(trim=...)``: each segment's rows as ``trim`` left them, in the
    run's columns: the rows of the untrimmed batches the same filter keeps."""
    import pyarrow.compute as pc

    run = synthesize(tmp_path / "run", SynthConfig(steps=6, restarts=0, retries=0)).run_dir
    scan = scan_run(run)
    schema = unified_schema(scan)
    halves = {str(i.path): (i.meta.first_seq + i.meta.last_seq) // 2 for i in scan.segments}
    odd = {str(i.path) for i in scan.segments[1::2]}

    def trim(info: SegmentInfo, rows: pa.Table) -> pa.Table:  # odd ones: their later half
        if str(info.path) not in odd:
            return rows
        return rows.filter(pc.greater(rows["seq"], pa.scalar(halves[str(info.path)])))

    def keys(table: pa.Table) -> list[tuple[str, int]]:
        return sorted(zip(table[FILENAME].to_pylist(), table["seq"].to_pylist(), strict=True))

    trimmed = pa.Table.from_batches(list(conformed_batches(scan, schema, trim=trim)), schema)
    whole = pa.Table.from_batches(list(conformed_batches(scan, schema)), schema)
    wanted = [(p, s) for p, s in keys(whole) if p not in odd or s > halves[p]]
    assert keys(trimmed) == wanted and 0 < len(wanted) < whole.num_rows
    assert trimmed.schema == schema
