"""Stripping every digest is a downgrade, not an old run, when checkpoints carry chain heads.

Digests stripped from every segment, an event could be edited freely and the run passed
with one warning ("written before the hash chain"), although its checkpoints recorded
chain heads, which only a writer sealing digests records. Now every segment up to a
recorded head must carry a digest: FT001 fails the run otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from ftaudit.eventlog.segment import DIGEST_KEY
from ftaudit.verifier import verify
from tests.support.corrupt import segments
from tests.support.runs import write_run

STRIPPED = (DIGEST_KEY, "ftaudit.prev_digest")


def _strip(seg: Path, edit: bool) -> None:
    meta = {
        k: v
        for k, v in (pq.read_metadata(seg).metadata or {}).items()
        if k.decode() not in STRIPPED
    }
    table = pq.read_table(seg)
    if edit and "trainer_weight_checksum.hashes" in table.column_names:
        i = table.schema.get_field_index("trainer_weight_checksum.hashes")
        field = table.schema.field(i)
        values = [[(k, "forged") for k, _ in v] if v else v for v in table.column(i).to_pylist()]
        table = table.set_column(i, field, pa.array(values, field.type))
    pq.write_table(table.replace_schema_metadata(meta), seg)


def _ft001(run: Path) -> list[tuple[str, str]]:
    (result,) = verify(run, select=["FT001"]).results
    return [(v.kind, v.severity.value) for v in result.violations]


def test_stripping_every_digest_then_editing_fails(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run")
    for seg in segments(run):
        _strip(seg, edit=True)
    found = _ft001(run)
    assert found and set(found) == {("stripped_digest", "error")}, found
    writers = {seg.parent.name for seg in segments(run)}
    assert len(found) == len(writers)  # every writer a checkpoint vouched for is named


def test_the_clean_run_keeps_its_digests(tmp_path: Path) -> None:
    assert _ft001(write_run(tmp_path / "run")) == []
