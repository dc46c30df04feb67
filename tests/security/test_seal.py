"""A seal kept outside the run catches a forger who rewrites the history and every digest.

Without a key, recomputing a writer's chain after an edit and patching the records that
vouch for it hid the edit (a checksum changed deep in the history). ``ftaudit seal``
records every writer's head; ``ft-verify --manifest`` fails a run that no longer reaches
them. With a key the seal is signed: a seal edited without the key is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from ftaudit.eventlog import Metric, RunLog, Trainer
from ftaudit.verifier.seal import seal_run, write_seal
from tests.support.cli import Invoke, check_exit
from tests.support.corrupt import segments
from tests.support.forge import patch_heads, rechain
from tests.support.runs import write_run

KEY = "correct horse battery staple"


def _forge_history(run: Path) -> None:
    """Edit a trainer's first segment (its weight checksums), recompute its chain, then
    patch every record that vouched for the old heads and recompute the driver's chain."""

    def edit_checksums(i: int, table: pa.Table) -> pa.Table:
        col = "trainer_weight_checksum.hashes"
        if i > 0 or col not in table.column_names:
            return table
        j = table.schema.get_field_index(col)
        values = [[(k, "forged") for k, _ in v] if v else v for v in table[col].to_pylist()]
        return table.set_column(j, table.schema.field(j), pa.array(values, table[col].type))

    folders = sorted((run / "events").iterdir())
    trainer = next(p for p in folders if p.name.startswith("trainer"))
    renamed: dict[str, str] = {}
    rechain(trainer, edit_checksums, renamed)
    rechain(next(p for p in folders if p.name.startswith("driver")), patch_heads(renamed), renamed)


@pytest.fixture
def run(good_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(good_run, target)
    return target


def _seal(ftaudit: Invoke, run: Path, out: Path, *args: str) -> dict:
    result = ftaudit("seal", run, "-o", out, *args)
    check_exit(result, 0)
    return json.loads(out.read_text())


def test_a_sealed_run_verifies_against_its_seal(ftaudit: Invoke, run: Path, tmp_path: Path) -> None:
    seal = _seal(ftaudit, run, tmp_path / "seal.json")
    assert set(seal["heads"]) == {p.name for p in (run / "events").iterdir()}
    assert seal["mac"] == ""
    check_exit(ftaudit("verify", run, "--manifest", tmp_path / "seal.json"), 0)


def test_a_forged_history_fails_against_the_seal(
    ftaudit: Invoke, run: Path, tmp_path: Path
) -> None:
    _seal(ftaudit, run, tmp_path / "seal.json")
    _forge_history(run)
    # without a seal the forgery holds: every digest, link and record is consistent
    check_exit(ftaudit("verify", run, "--rule", "FT001", "--require-finished"), 0)
    result = ftaudit(
        "verify", run, "--rule", "FT001", "--format", "json", "--manifest", tmp_path / "seal.json"
    )
    check_exit(result, 1)
    found = [v for r in json.loads(result.stdout)["results"] for v in r["violations"]]
    assert any("the seal recorded" in v["message"] for v in found), found


def test_an_added_writer_fails_against_the_seal(ftaudit: Invoke, run: Path, tmp_path: Path) -> None:
    _seal(ftaudit, run, tmp_path / "seal.json")
    log = RunLog.attach(run, 0)
    log.writer(Trainer(cell_index=7, rank_within_cell=0)).log(
        Metric(step=0, attempt=0, values={"loss": 0.0})
    )
    log.close()
    result = ftaudit("verify", run, "--format", "json", "--manifest", tmp_path / "seal.json")
    check_exit(result, 1)
    kinds = [v["kind"] for r in json.loads(result.stdout)["results"] for v in r["violations"]]
    assert "seal_mismatch" in kinds


def test_a_signed_seal_needs_its_key_and_refuses_edits(
    ftaudit: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    with monkeypatch.context() as env:  # the writers MAC with the key too (test_writer_macs)
        env.setenv("FTAUDIT_HMAC_KEY_FILE", str(key_file))
        run = write_run(tmp_path / "keyed")
    out = tmp_path / "seal.json"
    result = ftaudit("seal", run, "-o", out, "--key-file", key_file)
    check_exit(result, 0)
    assert KEY not in result.stdout + result.stderr + out.read_text()  # never shown
    assert "signed" in result.stderr
    check_exit(ftaudit("verify", run, "--manifest", out, "--key-file", key_file), 0)
    monkeypatch.setenv("FTAUDIT_HMAC_KEY", KEY)
    check_exit(ftaudit("verify", run, "--manifest", out), 0)  # the key from the environment
    monkeypatch.delenv("FTAUDIT_HMAC_KEY")

    missing = ftaudit("verify", run, "--manifest", out)
    check_exit(missing, 2)
    assert "the seal is signed; give its key" in missing.stderr

    # a forger rewrites the history and re-seals the heads without the key
    _forge_history(run)
    forged = json.loads(out.read_text())
    unsigned = tmp_path / "unsigned.json"
    _seal(ftaudit, run, unsigned)
    forged["heads"] = json.loads(unsigned.read_text())["heads"]
    out.write_text(json.dumps(forged))
    result = ftaudit("verify", run, "--manifest", out, "--key-file", key_file)
    check_exit(result, 2)
    assert "signature does not match" in result.stderr and KEY not in result.stderr
    # nor can the signature be stripped: with a key, an unsigned seal is refused
    downgraded = ftaudit("verify", run, "--manifest", unsigned, "--key-file", key_file)
    check_exit(downgraded, 2)
    assert "not signed" in downgraded.stderr


def test_a_bad_seal_file_is_exit_2_naming_it(ftaudit: Invoke, run: Path, tmp_path: Path) -> None:
    bad = tmp_path / "seal.json"
    bad.write_text('{"run_id": 1}')
    result = ftaudit("verify", run, "--manifest", bad)
    check_exit(result, 2)
    assert result.stderr.startswith(f"error: {bad}: not an ftaudit seal")


def test_segments_are_listed_explicitly(run: Path) -> None:
    assert segments(run)  # the helper the forgery uses sees the run's files


def test_a_seal_is_replaced_whole_never_rewritten_in_place(run: Path, tmp_path: Path) -> None:
    """A reader holding the old seal (here: a hard link, as an open file would) keeps
    reading it whole while a new seal is written: the new one is renamed into place."""
    out = tmp_path / "seal.json"
    write_seal(seal_run(run, None), out)
    before = out.read_bytes()
    reader = tmp_path / "held.json"
    os.link(out, reader)
    write_seal(seal_run(run, KEY.encode()), out)
    assert reader.read_bytes() == before
    assert json.loads(out.read_text())["mac"], "the new seal is in place"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
