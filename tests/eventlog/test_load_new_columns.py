"""``load.new_columns``: the columns of new segments a loaded table's schema lacks (a
follower's session adds them), None for a column typed otherwise (it opens anew); each
shape is looked at once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ftaudit.eventlog import scan_run
from ftaudit.eventlog.load import FILENAME, new_columns, unified_schema
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
