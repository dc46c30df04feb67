"""``ftaudit manifest``: from Python or Parquet, one data line out; bad input exits 2."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ftaudit.dataset import DatasetManifest, build_manifest, read_manifest
from ftaudit.trainer_hooks import DriverSession
from tests.support.cli import Invoke, check_exit

DATASET = """
import numpy as np

class Windows:
    def __len__(self):
        return 9

    def __getitem__(self, i):
        return {"input_ids": np.arange(i, i + 4), "text": str(i)}

def broken():
    raise RuntimeError("no data today")

class Shards:
    # each item read from its own file; shard 2 was never written

    def __len__(self):
        return 3

    def __getitem__(self, i):
        with open(f"shard{i}.bin", "rb") as f:
            return np.frombuffer(f.read(), dtype=np.uint8)
"""


def _module(tmp_path: Path) -> Path:
    path = tmp_path / "mydata.py"
    path.write_text(DATASET)
    return path


def _expected() -> DatasetManifest:
    return build_manifest([np.arange(i, i + 4) for i in range(9)])


def test_from_a_python_dataset(ftaudit: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "m.parquet"
    result = ftaudit(
        "manifest", out, "--dataset", f"{_module(tmp_path)}:Windows", "--field", "input_ids"
    )
    check_exit(result, 0)
    digest, size, path = result.stdout.split()
    assert (digest, size, path) == (_expected().digest, "9", str(out))
    assert read_manifest(out).digest == digest
    assert "9 items" in result.stderr


def test_from_a_parquet_column(ftaudit: Invoke, tmp_path: Path) -> None:
    data = tmp_path / "tokens.parquet"
    rows = [list(range(i, i + 4)) for i in range(9)]
    pq.write_table(pa.table({"input_ids": rows, "text": [str(i) for i in range(9)]}), data)
    result = ftaudit("manifest", tmp_path / "m.parquet", "--parquet", data, "--column", "input_ids")
    check_exit(result, 0)
    assert result.stdout.split()[0] == _expected().digest


def test_a_run_names_an_external_manifest(ftaudit: Invoke, tmp_path: Path) -> None:
    """declare_manifest(copy=False) names it by digest; --data-manifest supplies it."""
    out = tmp_path / "m.parquet"
    check_exit(
        ftaudit(
            "manifest", out, "--dataset", f"{_module(tmp_path)}:Windows", "--field", "input_ids"
        ),
        0,
    )
    run = tmp_path / "run"
    session = DriverSession.start(run, buffer_size=10, dataset_size=9)
    event = session.declare_manifest(out, copy=False)
    session.finish()
    assert event.path == str(out) and not (run / "manifests").exists()
    alone = ftaudit("verify", run, "--rule", "FT008")
    check_exit(alone, 0)
    assert "warnings" in alone.stdout and "neither in the run's manifests/ folder" in alone.stdout
    given = ftaudit("verify", run, "--rule", "FT008", "--data-manifest", out, "--strict")
    check_exit(given, 0)
    assert f"checked against dataset manifest {event.digest[:16]}" in given.stdout


HF_DATASET = """
import datasets

def load():
    return datasets.load_from_disk({path!r}).with_format("torch")
"""


def test_from_a_hugging_face_dataset_saved_to_disk(ftaudit: Invoke, tmp_path: Path) -> None:
    """The usual flow: a tokenized ``datasets.Dataset`` on disk, loaded by a function."""
    datasets = pytest.importorskip("datasets")
    saved = tmp_path / "tokenized"
    rows = [np.arange(i, i + 4).tolist() for i in range(9)]
    datasets.Dataset.from_dict({"input_ids": rows, "text": list("abcdefghi")}).save_to_disk(saved)
    (tmp_path / "hfdata.py").write_text(HF_DATASET.format(path=str(saved)))
    result = ftaudit(
        "manifest", tmp_path / "m.parquet", "--dataset", f"{tmp_path / 'hfdata.py'}:load",
        "--field", "input_ids", "--chunk-size", "4",
    )  # fmt: skip
    check_exit(result, 0)
    assert result.stdout.split()[:2] == [_expected().digest, "9"]
    no_field = ftaudit(
        "manifest", tmp_path / "n.parquet", "--dataset", f"{tmp_path / 'hfdata.py'}:load"
    )
    check_exit(no_field, 2)
    assert "items are dicts (fields: input_ids, text)" in no_field.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dataset", "mydata.py:Nope"], "has no attribute 'Nope'"),
        (["--dataset", "mydata.py:broken"], "no data today"),
        (["--dataset", "mydata.py:Windows"], "items are dicts (fields: input_ids, text)"),
        (["--dataset", "mydata.py:Windows", "--field", "ids"], "no field 'ids'"),
        (["--dataset", "nosuchfile.py:x"], "nosuchfile.py: no such file"),
        (["--dataset", "no_colon"], "expected MODULE:ATTR"),
        (["--parquet", "missing.parquet", "--column", "x"], "missing.parquet: no such file"),
        # the dataset's own I/O error names the dataset and its file, not the output
        (
            ["--dataset", "mydata.py:Shards"],
            "mydata.py:Shards: reading the dataset failed: shard2.bin: No such file or directory",
        ),
        ([], "give exactly one of"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    ftaudit: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    _module(tmp_path)
    for i in (0, 1):
        (tmp_path / f"shard{i}.bin").write_bytes(bytes(range(i, i + 4)))
    monkeypatch.chdir(tmp_path)
    result = ftaudit("manifest", tmp_path / "m.parquet", *args)
    check_exit(result, 2)
    assert result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr
    assert not (tmp_path / "m.parquet").exists()


def test_an_output_that_cannot_be_written_is_named(ftaudit: Invoke, tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    out = tmp_path / "taken" / "m.parquet"
    result = ftaudit(
        "manifest", out, "--dataset", f"{_module(tmp_path)}:Windows", "--field", "input_ids"
    )
    check_exit(result, 2)
    assert result.stderr.startswith(f"error: cannot write {out}: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
