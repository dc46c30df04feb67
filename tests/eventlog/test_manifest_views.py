"""The data-identity views: ``manifest_items``, ``fed_samples``, ``fed_content``.

A run declares a 12-item manifest; two cells feed positions, one of them the wrong
content under the right ids. The views, queried through the sandboxed ``ftaudit.connect``,
show each fed sample with the manifest items its content is, and agree with FT008 on
which samples fed other data than they name.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ftaudit
from ftaudit.dataset import DatasetManifest, write_manifest
from ftaudit.verifier import verify
from tests.support.builder import RunBuilder
from tests.support.data_identity import FP, MANIFEST, N, start, step

WRONG = """SELECT sample_index FROM fed_content
           WHERE NOT list_contains(content_items, sample_index % 12) ORDER BY 1"""


@pytest.fixture
def run(tmp_path: Path) -> Path:
    """Steps 0-1 clean; in step 2 cell 1 feeds items 0 and 1 again as positions 10 and 11."""
    builder = RunBuilder(tmp_path / "run", B=40, cells=2)
    inc = start(builder)
    step(inc, 0, [0, 1, 2, 3])
    step(inc, 1, [4, 5, 6, 7])
    step(inc, 2, [8, 9, 10, 11], content=[8, 9, 0, 1])
    inc.fed(3, [12], [FP[15]], cell=0, items=[0])  # no item of the dataset at all
    inc.finish()
    return builder.root


def test_every_fed_sample_with_the_items_its_content_is(run: Path) -> None:
    with ftaudit.connect(run) as con:
        items = con.sql(
            "SELECT digest, count(*), min(item), max(item) FROM manifest_items GROUP BY 1"
        )
        assert items.fetchall() == [(MANIFEST.digest, N, 0, N - 1)]
        fed = con.sql(
            "SELECT step, cell, sample_index, loader_item, manifest, content_items "
            "FROM fed_content ORDER BY sample_index"
        ).fetchall()
        assert [(s, c, i) for s, c, i, *_ in fed] == [
            (0, 0, 0), (0, 0, 1), (0, 1, 2), (0, 1, 3), (1, 0, 4), (1, 0, 5), (1, 1, 6),
            (1, 1, 7), (2, 0, 8), (2, 0, 9), (2, 1, 10), (2, 1, 11), (3, 0, 12),
        ]  # fmt: skip
        assert {m for *_, m, _ in fed} == {MANIFEST.digest}
        assert [c for *_, c in fed] == [[i] for i in [*range(10), 0, 1]] + [[]]
        assert [li for _, _, _, li, _, _ in fed] == [None] * 12 + [0]
        wrong = [i for (i,) in con.sql(WRONG).fetchall()]
    assert wrong == [10, 11, 12]
    report = verify(run, select=["FT008"])
    flagged = {
        i
        for v in report.results[0].violations
        if v.kind == "wrong_content"
        for i in v.sample_indices
    }
    assert flagged == {10, 11}  # step 3 never committed: FT008 judges committed samples only


def test_a_manifest_that_is_no_manifest_is_left_out(run: Path) -> None:
    """Junk in manifests/, a second real manifest, and a link: only real files load."""
    folder = run / "manifests"
    (folder / "junk.parquet").write_bytes(b"not parquet")
    other = DatasetManifest.of(FP[:3])
    write_manifest(other, folder / f"{other.digest}.parquet")
    (folder / "link.parquet").symlink_to(folder / f"{other.digest}.parquet")
    with ftaudit.connect(run) as con:
        rows = con.sql(
            "SELECT digest, count(*) FROM manifest_items GROUP BY 1 ORDER BY 2"
        ).fetchall()
        assert rows == [(other.digest, 3), (MANIFEST.digest, N)]
        with pytest.raises(Exception, match="disabled by configuration"):
            con.sql(f"SELECT * FROM read_parquet('{folder / 'junk.parquet'}')").fetchall()


def test_a_run_without_manifests_has_empty_data_views(tmp_path: Path) -> None:
    builder = RunBuilder(tmp_path / "run", B=40, cells=2)
    inc = start(builder, manifest=False)
    step(inc, 0, [0, 1, 2, 3])
    inc.finish()
    with ftaudit.connect(builder.root) as con:
        assert con.sql("SELECT count(*) FROM manifest_items").fetchall() == [(0,)]
        content = con.sql("SELECT manifest, content_items FROM fed_content").fetchall()
        assert content == [(None, [])] * 4
