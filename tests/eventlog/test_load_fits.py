"""``load.fits``: whether a loaded table's schema holds every column of new segments (a
follower's session moves, else it opens anew); each shape is looked at once."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from ftaudit.eventlog import scan_run
from ftaudit.eventlog.load import FILENAME, fits, unified_schema
from ftaudit.synth import SynthConfig, synthesize


def test_fits_holds_for_the_runs_schema_and_fails_without_one_column_or_with_another_type(
    tmp_path: Path,
) -> None:
    run = synthesize(tmp_path / "run", SynthConfig(steps=6, restarts=0, retries=0)).run_dir
    scan = scan_run(run)
    schema = unified_schema(scan)
    shapes = {id(info.schema) for info in scan.segments}
    assert len(shapes) < len(scan.segments)  # segments of one shape share a schema
    assert fits(scan, schema)
    payload = next(n for n in schema.names if "." in n)  # a type's payload column
    assert not fits(scan, schema.remove(schema.get_field_index(payload)))
    field = schema.field(payload)
    other = pa.string() if field.type != pa.string() else pa.int64()
    retyped = schema.set(schema.get_field_index(payload), pa.field(payload, other))
    assert not fits(scan, retyped)
    assert fits(scan, schema.remove(schema.get_field_index(FILENAME)))  # not a segment's
