"""Writers MAC what they seal; given the key, the verifier refuses what a keyless forger made.

Without a key a forger who edits a segment, recomputes its digest and chain and patches
every checkpoint record that vouched for it leaves a consistent log (exit 0: see
``test_seal.py``). With the run's key (``WriterOptions.mac_key`` or
``$FTAUDIT_HMAC_KEY``/``$FTAUDIT_HMAC_KEY_FILE``) every segment's footer carries the MAC
of its digest and every checkpoint/``run_finished`` record a MAC bound to its place;
``ft-verify`` given the key fails a run whose MACs are missing or wrong (FT001, naming the
file). Runs written without a key verify as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ftaudit.eventlog import Metric, RunLog, Trainer, WriterOptions, step_context
from ftaudit.eventlog.segment import MAC_KEY
from tests.support.cli import Invoke, check_exit
from tests.support.forge import patch_heads, rechain

KEY = "the run's own key"


def _write(run_dir: Path, options: WriterOptions | None = None) -> Path:
    """Four steps of one trainer, a checkpoint after each, and a finished run."""
    run = RunLog.start(run_dir, buffer_size=8, options=options)
    trainer = run.writer(Trainer(cell_index=0, rank_within_cell=0))
    for step in range(4):
        with step_context(step, 0):
            trainer.log(Metric(values={"loss": 1.0 / (step + 1)}))
        run.flush()
        run.record_checkpoint(step)
    run.finish()
    return run_dir


def _folder(run: Path, prefix: str) -> Path:
    return next(p for p in sorted((run / "events").iterdir()) if p.name.startswith(prefix))


def _findings(ftaudit: Invoke, run: Path, *args: str, code: int) -> list[dict]:
    result = ftaudit("verify", run, "--rule", "FT001", "--format", "json", *args)
    check_exit(result, code)
    assert KEY not in result.stdout + result.stderr  # the key is never shown
    return [v for r in json.loads(result.stdout)["results"] for v in r["violations"]]


@pytest.fixture
def keyed(tmp_path: Path) -> Path:
    return _write(tmp_path / "keyed", WriterOptions(mac_key=KEY.encode(), fsync=False))


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "key"
    path.write_text(KEY + "\n")
    return path


def test_a_keyed_run_carries_macs_and_verifies_with_its_key(
    ftaudit: Invoke, keyed: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert KEY not in repr(WriterOptions(mac_key=KEY.encode()))
    for seg in keyed.glob("events/*/*.parquet"):
        assert len((pq.read_metadata(seg).metadata or {})[MAC_KEY.encode()]) == 64, seg
    assert _findings(ftaudit, keyed, "--key-file", str(key_file), code=0) == []
    monkeypatch.setenv("FTAUDIT_HMAC_KEY", KEY)
    assert _findings(ftaudit, keyed, code=0) == []
    monkeypatch.delenv("FTAUDIT_HMAC_KEY")
    # without the key nothing is checked, and the report says so
    found = _findings(ftaudit, keyed, code=0)
    assert [v["kind"] for v in found] == ["unchecked_mac"], found


def test_the_key_comes_from_the_environment_too(
    ftaudit: Invoke, tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FTAUDIT_HMAC_KEY_FILE", str(key_file))
    run = _write(tmp_path / "env")
    assert _findings(ftaudit, run, code=0) == []
    other = tmp_path / "other-key"
    other.write_text("not the run's key\n")
    found = _findings(ftaudit, run, "--key-file", str(other), code=1)
    assert {v["kind"] for v in found} == {"bad_mac"}, found


def test_a_run_written_without_a_key_verifies_as_before(
    ftaudit: Invoke, tmp_path: Path, key_file: Path
) -> None:
    run = _write(tmp_path / "plain", WriterOptions(fsync=False))
    for seg in run.glob("events/*/*.parquet"):
        assert MAC_KEY.encode() not in (pq.read_metadata(seg).metadata or {})
    assert _findings(ftaudit, run, code=0) == []
    # given a key, a run without MACs is refused: a forger cannot downgrade by stripping them
    found = _findings(ftaudit, run, "--key-file", str(key_file), code=1)
    assert found and {v["kind"] for v in found} == {"missing_mac"}, found
    assert all(v["location"]["segment"] in v["message"] for v in found), found


def _forge_loss(run: Path, *, strip_mac: bool) -> Path:
    """Change the trainer's first loss, recompute its chain, patch every record's heads."""

    def edit(i: int, table: pa.Table) -> pa.Table:
        col = "metric.values"
        if i > 0 or col not in table.column_names:
            return table
        j = table.schema.get_field_index(col)
        values = [[(k, 0.001) for k, _ in v] if v else v for v in table[col].to_pylist()]
        return table.set_column(j, table.schema.field(j), pa.array(values, table[col].type))

    renamed: dict[str, str] = {}
    trainer = _folder(run, "trainer")
    rechain(trainer, edit, renamed, strip_mac=strip_mac)
    rechain(_folder(run, "driver"), patch_heads(renamed), renamed, strip_mac=strip_mac)
    return min(trainer.glob("*.parquet"))


@pytest.mark.parametrize("strip_mac", [False, True], ids=["mac-kept", "mac-stripped"])
def test_a_forged_segment_re_digested_without_the_key_is_refused(
    ftaudit: Invoke, keyed: Path, key_file: Path, strip_mac: bool
) -> None:
    forged = _forge_loss(keyed, strip_mac=strip_mac)
    # the keyless evidence is consistent: the forgery holds without the key
    assert {v["kind"] for v in _findings(ftaudit, keyed, code=0)} <= {"unchecked_mac"}
    found = _findings(ftaudit, keyed, "--key-file", str(key_file), code=1)
    want = "missing_mac" if strip_mac else "bad_mac"
    hit = [v for v in found if v["location"].get("segment") == str(forged)]
    assert hit and hit[0]["kind"] == want, found
    assert str(forged) in hit[0]["message"]


def test_a_swapped_checkpoint_record_is_refused(
    ftaudit: Invoke, keyed: Path, key_file: Path
) -> None:
    """Two checkpoint records trade places (their MACs with them), digests recomputed."""
    driver = _folder(keyed, "driver")
    segs = [s for s in sorted(driver.glob("*.parquet")) if "checkpoint_saved" in _types(s)]
    assert len(segs) >= 2
    a, b = segs[1], segs[2]
    row_a, row_b = _checkpoint_row(a), _checkpoint_row(b)

    def swap(_: int, table: pa.Table) -> pa.Table:
        mine = row_a if table.column("seq")[0].as_py() == _first_seq(a) else None
        mine = row_b if table.column("seq")[0].as_py() == _first_seq(b) else mine
        other = {id(row_a): row_b, id(row_b): row_a}.get(id(mine))
        if other is None:
            return table
        for name in [c for c in table.column_names if c.startswith("checkpoint_saved.")]:
            j = table.schema.get_field_index(name)
            values = table[name].to_pylist()
            at = table.column("type").to_pylist().index("checkpoint_saved")
            values[at] = other[name]
            table = table.set_column(j, table.schema.field(j), pa.array(values, table[name].type))
        return table

    rechain(driver, swap, {})
    found = _findings(ftaudit, keyed, "--key-file", str(key_file), code=1)
    records = [v for v in found if " record (writer " in v["message"]]
    assert {v["kind"] for v in records} == {"bad_mac"}, found
    assert {v["location"]["segment"] for v in records} == {str(a), str(b)}, found
    assert any("checkpoint 1 record" in v["message"] for v in records), records


def _types(seg: Path) -> str:
    return (pq.read_metadata(seg).metadata or {})[b"ftaudit.types"].decode()


def _first_seq(seg: Path) -> int:
    return int(seg.stem)


def _checkpoint_row(seg: Path) -> dict:
    table = pq.read_table(seg)
    at = table.column("type").to_pylist().index("checkpoint_saved")
    return {
        c: table[c][at].as_py() for c in table.column_names if c.startswith("checkpoint_saved.")
    }
