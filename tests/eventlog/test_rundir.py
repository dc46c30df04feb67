"""The one owner of a run directory: layout, the is-a-run check, and the segment listing that
the full reader, the incremental reader and the resume index all use."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from ftaudit.errors import CorruptSegmentError, UnusableInputError
from ftaudit.eventlog import ResumeIndex, is_run, list_segments, scan_run
from ftaudit.eventlog.rundir import (
    EVENTS_DIR,
    ListedBefore,
    SegmentFile,
    SegmentListing,
    covered,
    segment_path,
)
from ftaudit.synth import synthesize
from ftaudit.verifier.incremental import select
from tests.support.synth_runs import small_synth

TINY = small_synth(
    8, buffer_size=256, samples_per_step=16, restarts=1, retries=1, checkpoint_every=2, seed=3
)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synthesize(tmp_path_factory.mktemp("rundir") / "run", TINY).run_dir


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to, symlinks=True)
    return to


@pytest.mark.parametrize("name", ["g[1]", "**", "a*b?", "{x,y}"])
def test_glob_characters_in_the_run_name_are_read_as_themselves(
    tiny_run: Path, tmp_path: Path, name: str
) -> None:
    # a decoy that a glob built from the path would match instead of (or besides) the run
    _copy(tiny_run, tmp_path / "g1")
    run = _copy(tiny_run, tmp_path / name)
    listing = list_segments(run)
    assert len(listing) == len(scan_run(tiny_run).segments)
    assert all(f.path.parent.parent == run / EVENTS_DIR for f in listing.files)
    assert [s.path for s in scan_run(run).segments] == [f.path for f in listing.files]
    chosen, _ = select(run, since=4)
    assert chosen.segments and all(s.path.is_relative_to(run) for s in chosen.segments)
    latest = ResumeIndex.open(tiny_run).latest_checkpoint()
    assert latest is not None and ResumeIndex.open(run).latest_checkpoint() == latest


def test_listing_is_ordered_by_writer_then_sequence(tiny_run: Path) -> None:
    listing = list_segments(tiny_run)
    assert list(listing.writers) == sorted(listing.writers)
    for writer, files in listing.writers.items():
        assert [f.first_seq for f in files] == sorted(f.first_seq for f in files)
        assert all(f.path == segment_path(tiny_run, writer, f.first_seq) for f in files)


def _readers(run: Path) -> list:
    """Every reader of a run directory: each must refuse what the listing refuses."""
    return [
        lambda: scan_run(run),
        lambda: select(run, since=4),
        lambda: ResumeIndex.open(run),
    ]


def _link_writer_folder(run: Path) -> None:
    folder = next(p for p in sorted((run / EVENTS_DIR).iterdir()))
    moved = run.parent / "elsewhere"
    os.rename(folder, moved)
    folder.symlink_to(moved)


def _link_segment(run: Path) -> None:
    segment = sorted((run / EVENTS_DIR).glob("*/*.parquet"))[-1]
    moved = run.parent / "outside.parquet"
    os.rename(segment, moved)
    segment.symlink_to(moved)


def _misname_segment(run: Path) -> None:
    segment = sorted((run / EVENTS_DIR).glob("*/*.parquet"))[-1]
    os.rename(segment, segment.with_name("12.parquet"))


def _link_temp_file(run: Path) -> None:
    folder = next(p for p in sorted((run / EVENTS_DIR).iterdir()))
    (run.parent / "target").write_bytes(b"x")
    (folder / ".000000000001.parquet.1.tmp").symlink_to(run.parent / "target")


@pytest.mark.parametrize(
    ("damage", "error", "message"),
    [
        (_link_writer_folder, UnusableInputError, "unexpected entry in events/"),
        (_link_segment, CorruptSegmentError, "symbolic link"),
        (_misname_segment, CorruptSegmentError, "12-digit sequence number"),
        (_link_temp_file, UnusableInputError, "unexpected entry in a writer folder"),
    ],
)
@pytest.mark.parametrize("reader", range(3), ids=["full", "incremental", "resume"])
def test_every_reader_refuses_the_same_entries(
    tiny_run: Path, tmp_path: Path, damage, error: type, message: str, reader: int
) -> None:
    run = _copy(tiny_run, tmp_path / "run")
    damage(run)
    with pytest.raises(error, match=message) as err:
        _readers(run)[reader]()
    assert "\n" not in str(err.value)


def test_is_run_and_an_empty_listing(tmp_path: Path) -> None:
    assert not is_run(tmp_path / "missing") and not is_run(tmp_path)
    assert len(list_segments(tmp_path / "missing", allow_empty=True)) == 0
    (tmp_path / EVENTS_DIR).mkdir()
    assert is_run(tmp_path)
    assert len(list_segments(tmp_path, allow_empty=True)) == 0
    with pytest.raises(UnusableInputError, match="no event segments"):
        list_segments(tmp_path)


def test_a_listing_that_reuses_the_last_one_lists_what_a_fresh_one_does(
    tiny_run: Path, tmp_path: Path
) -> None:
    """A follower's listing reuses the files it listed before (the same objects); after new
    segments, a removed one and a merged one, it lists exactly what a fresh listing does,
    and a listed file turned into a link is refused all the same."""
    from ftaudit.eventlog.rundir import ListedBefore

    run = _copy(tiny_run, tmp_path / "run")
    before = ListedBefore()
    first = list_segments(run, before=before)
    assert first == list_segments(run)
    again = list_segments(run, before=before)
    assert again == first
    assert all(a is b for a, b in zip(again.files, first.files, strict=True))

    writer = run / EVENTS_DIR / first.files[0].writer
    segments = sorted(writer.iterdir())
    removed, last = segments[0], segments[-1]
    removed.unlink()
    (writer / "999999999999.parquet").write_bytes(last.read_bytes())  # a new name
    merged = writer / f"{segments[1].stem}-{segments[1].stem}.parquet"
    merged.write_bytes(segments[1].read_bytes())
    changed = list_segments(run, before=before)
    assert changed == list_segments(run)
    assert removed not in {f.path for f in changed.files}
    kept = {(w, name) for w, files in before.files.items() for name in files}
    assert kept == {(f.writer, f.path.name) for f in changed.files} | {
        (writer.name, segments[1].name)  # held by the merged one: listed, then left out
    }

    os.unlink(last)
    os.symlink(segments[-2], last)
    with pytest.raises(CorruptSegmentError, match="symbolic link"):
        list_segments(run, before=before)


def _touch(folder: Path, name: str) -> None:
    (folder / name).write_bytes(b"")


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda w: _touch(w, "900000000000.parquet"), id="a-new-flush"),
        pytest.param(
            lambda w: (_touch(w, "900000000000.parquet"), _touch(w, "900000000002.parquet")),
            id="two-new-flushes",
        ),
        pytest.param(lambda w: _touch(w, ".900000000000.parquet.1.tmp"), id="a-temp-file"),
        pytest.param(lambda w: _touch(w, "000000000000.parquet"), id="a-name-before-the-last"),
        pytest.param(
            lambda w: _touch(w, "800000000000-900000000000.parquet"), id="a-merged-segment"
        ),
        pytest.param(
            lambda w: (
                _touch(w, "800000000000-900000000000.parquet"),
                _touch(w, "900000000000.parquet"),
            ),
            id="a-flush-a-merged-one-reaches",
        ),
        pytest.param(lambda w: next(w.iterdir()).unlink(), id="a-removed-file"),
    ],
)
def test_a_listing_grown_from_the_last_one_lists_what_a_fresh_one_does(
    tiny_run: Path, tmp_path: Path, change
) -> None:
    """Listed again after each change (and after it again with a later flush of a merged
    range's reach), a reused listing equals a fresh one: files, held ones, torn ones."""
    run = _copy(tiny_run, tmp_path / "run")
    before = ListedBefore()
    first = list_segments(run, before=before)
    writer = run / EVENTS_DIR / sorted(os.listdir(run / EVENTS_DIR))[0]
    change(writer)
    again = list_segments(run, before=before)
    assert again == list_segments(run)
    _assert_added_since(again, first)
    _touch(writer, "850000000000.parquet")  # inside a merged range when there is one
    _touch(writer, "950000000000.parquet")
    assert list_segments(run, before=before) == list_segments(run)
    assert list_segments(run, before=before) == list_segments(run)


def _assert_added_since(listing: SegmentListing, before: SegmentListing) -> None:
    """``added_since`` gives exactly the new segments where nothing listed before went
    and each writer's new ones come after its old ones; None otherwise."""
    old, new = set(before.files), set(listing.files)
    grew = all(
        files[: len(before.writers.get(w, ()))] == before.writers.get(w, ())
        for w, files in listing.writers.items()
    )
    if old <= new and grew and before.writers.keys() <= listing.writers.keys():
        added = listing.added_since(before)
        assert added is not None and set(added) == new - old
        assert list(added) == [f for f in listing.files if f not in old]  # in listing order
    else:
        assert listing.added_since(before) is None


def test_added_since_grown_and_changed_listings(tiny_run: Path, tmp_path: Path) -> None:
    """A listing grown by flushes gives its new segments, a same one none; one that lost a
    file or a writer folder gives None (the cases of the test above check the rest)."""
    run = _copy(tiny_run, tmp_path / "run")
    first = list_segments(run)
    assert first.added_since(first) == ()
    writers = sorted((run / EVENTS_DIR).iterdir())
    _touch(writers[0], "900000000000.parquet")
    _touch(writers[-1], "900000000001.parquet")
    grown = list_segments(run)
    added = grown.added_since(first)
    assert added is not None
    assert [(f.writer, f.path.name) for f in added] == [
        (writers[0].name, "900000000000.parquet"),
        (writers[-1].name, "900000000001.parquet"),
    ]
    assert first.added_since(grown) is None  # it lost the two
    (writers[0] / "900000000000.parquet").unlink()
    assert list_segments(run).added_since(grown) is None
    shutil.rmtree(writers[-1])
    assert list_segments(run).added_since(first) is None


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda w, last: os.symlink(last, w / "900000000000.parquet"), "symbolic link"),
        (lambda w, last: _touch(w, "900000000000.txt"), "unexpected file"),
        (lambda w, last: _touch(w, "9000.parquet"), "12-digit"),
        (lambda w, last: (w / "900000000000.parquet").mkdir(), "not a regular file"),
        (lambda w, last: (last.unlink(), os.symlink(w / "x", last)), "symbolic link"),
    ],
)
def test_a_listing_grown_from_the_last_one_refuses_what_a_fresh_one_does(
    tiny_run: Path, tmp_path: Path, damage, message: str
) -> None:
    """A new entry that is not a plain segment file, or a listed file turned into a link
    while new flushes came, is refused by a reused listing as by a fresh one."""
    run = _copy(tiny_run, tmp_path / "run")
    before = ListedBefore()
    list_segments(run, before=before)
    writer = run / EVENTS_DIR / sorted(os.listdir(run / EVENTS_DIR))[0]
    _touch(writer, "800000000000.parquet")
    damage(writer, sorted(writer.iterdir())[0])
    errors = []
    for listing in (lambda: list_segments(run, before=before), lambda: list_segments(run)):
        with pytest.raises((CorruptSegmentError, UnusableInputError), match=message) as err:
            listing()
        errors.append(str(err.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("seed", range(30))
def test_covered_is_every_segment_another_merged_range_holds(seed: int) -> None:
    # random merged ranges (nested, overlapping, sharing a start) and single flushes
    rng = random.Random(seed)
    ranges = {(a, a + rng.randrange(1, 40)) for a in rng.sample(range(200), 12)}
    ranges |= {(a, b + rng.randrange(1, 9)) for a, b in rng.sample(sorted(ranges), 3)}
    flushes = set(rng.sample(range(260), 40))
    files = [SegmentFile(Path(f"{a}-{b}"), "w", a, b) for a, b in sorted(ranges)]
    files += [SegmentFile(Path(str(a)), "w", a) for a in sorted(flushes)]
    rng.shuffle(files)
    want = {
        f.path
        for f in files
        if any(
            a <= f.first_seq
            and (f.last_seq or f.first_seq) <= b
            and (a, b) != (f.first_seq, f.last_seq)
            for a, b in ranges
        )
    }
    assert covered(files) == want
