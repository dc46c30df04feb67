"""The run directory: its layout, the "is this a run" check, and the one listing of its files.

Layout (see ``eventlog/README.md``)::

    RUN_DIR/run.json                                   the run id
    RUN_DIR/incarnations/<k, 6 digits>/                one per started incarnation
    RUN_DIR/events/<writer id>/<first seq, 12 digits>.parquet     one flush
    RUN_DIR/events/<writer id>/<first seq>-<last seq>.parquet      merged flushes (rolled
                                                                    or compacted)
    RUN_DIR/events/<writer id>/.<...>.tmp              a flush a crash cut short
    RUN_DIR/manifests/<digest>.parquet                 dataset manifests (FT008)
    RUN_DIR/compacting/                                where merged segments are staged

Every reader (the full scan, the incremental window, the resume index) lists a run's
segments through :func:`list_segments`, which returns explicit paths: a user's run
directory is never pasted into a glob, so a run named ``g[1]`` or ``**`` reads as itself.
This module imports nothing beyond the standard library, so a writer process stays light.
"""

from __future__ import annotations

import bisect
import itertools
import json
import operator
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from ftaudit.errors import (
    CorruptSegmentError,
    RunFileError,
    SegmentVanishedError,
    UnusableInputError,
)

EVENTS_DIR = "events"
"""The folder of a run's segments, one sub-folder per writer."""
RUN_FILE = "run.json"
"""The file holding the run id."""
INCARNATIONS_DIR = "incarnations"
"""The folder whose entries claim incarnation numbers (an atomic mkdir each)."""
MANIFESTS_DIR = "manifests"
"""The folder of the dataset manifests a run declared (``ftaudit.dataset``), by digest."""
COMPACTING_DIR = "compacting"
"""Where a merged segment (a writer's roll, ``ftaudit compact``) is built before it is moved
into ``events/``: a merge cut short leaves no temp file that would read as a torn flush."""
SEGMENT_SUFFIX = ".parquet"
TEMP_PREFIX = "."
"""A flush writes ``.<name>.<pid>.tmp`` first and renames it: a dot file is a torn flush."""
SEQ_DIGITS = 12
RANGE_SEP = "-"
"""Separates the first and last sequence numbers in a merged segment's name."""


def events_dir(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / EVENTS_DIR


def writer_dir(run_dir: str | os.PathLike[str], writer: str) -> Path:
    """The folder of one writer's segments."""
    return events_dir(run_dir) / writer


def segment_path(
    run_dir: str | os.PathLike[str], writer: str, first_seq: int, last_seq: int | None = None
) -> Path:
    """Where the segment of ``writer`` starting at ``first_seq`` lives; a merged segment
    (``last_seq`` given) is named by its whole range, so it never takes a flush's name."""
    name = f"{first_seq:0{SEQ_DIGITS}d}"
    if last_seq is not None:
        name += f"{RANGE_SEP}{last_seq:0{SEQ_DIGITS}d}"
    return writer_dir(run_dir, writer) / f"{name}{SEGMENT_SUFFIX}"


def manifest_path(run_dir: str | os.PathLike[str], digest: str) -> Path:
    """Where a run keeps the dataset manifest of ``digest``."""
    return Path(run_dir) / MANIFESTS_DIR / f"{digest}{SEGMENT_SUFFIX}"


def incarnation_dir(run_dir: str | os.PathLike[str], incarnation: int) -> Path:
    return Path(run_dir) / INCARNATIONS_DIR / f"{incarnation:06d}"


def is_run(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` already holds a run (its events folder exists, even empty).

    Writers that must start in a fresh directory (the demo, synth) refuse such a folder.
    """
    return os.path.lexists(events_dir(run_dir))


@dataclass(frozen=True)
class SegmentFile:
    """One sealed segment as listed: its path, its writer folder and its first sequence number
    (from the name; the footer is checked against it when the file is read)."""

    path: Path
    writer: str
    first_seq: int
    last_seq: int | None = None
    """A merged segment's last sequence number (from its name); None for one flush's."""


@dataclass(frozen=True)
class SegmentListing:
    """The segments of a run, per writer in sequence order, and the torn temp files."""

    run_dir: Path
    writers: Mapping[str, tuple[SegmentFile, ...]]
    """Writer id -> its segments ordered by first sequence number (writers in name order),
    without the segments a merged segment holds (see :func:`covered`)."""
    torn: tuple[Path, ...]
    covered: tuple[Path, ...] = ()
    """Segments a merged segment of their writer holds: left by a merge that has not removed
    them yet (a writer removes a roll's originals one roll later; a compaction or a writer
    cut short leaves some). Readers skip them; ``ftaudit compact`` removes them."""

    @property
    def files(self) -> tuple[SegmentFile, ...]:
        """Every segment, ordered by writer then sequence number."""
        return tuple(f for files in self.writers.values() for f in files)

    def __len__(self) -> int:
        return sum(len(f) for f in self.writers.values())

    def added_since(self, before: SegmentListing) -> tuple[SegmentFile, ...] | None:
        """The segments listed here after those of ``before``, when this listing only grew
        from it: each writer of ``before`` still lists its segments, in order, and perhaps
        more after them. None where one changed otherwise (a roll merged some, a file or a
        writer folder went): then compare the listings whole.

        A follower's poll lists thousands of segments and a few dozen are new: each
        writer's old ones compare in C (the same objects, when :func:`list_segments`
        reused them), not as paths hashed in Python."""
        if not self.writers.keys() >= before.writers.keys():
            return None
        added: list[SegmentFile] = []
        for writer, files in self.writers.items():
            was = before.writers.get(writer, ())
            if files[: len(was)] != was:
                return None
            added += files[len(was) :]
        return tuple(added)


def _seq(text: str) -> int | None:
    return int(text) if len(text) == SEQ_DIGITS and text.isdigit() and text.isascii() else None


def segment_range(name: str) -> tuple[int, int | None] | None:
    """``(first seq, last seq or None)`` from a segment's file name; None when it is not one."""
    first, sep, last = name[: -len(SEGMENT_SUFFIX)].partition(RANGE_SEP)
    start, end = _seq(first), _seq(last) if sep else None
    if start is None or (sep and (end is None or end < start)):
        return None
    return start, end


def covered(files: list[SegmentFile]) -> set[Path]:
    """The segments of one writer that a merged segment of it holds.

    A merged segment ``a-b`` holds every segment whose range lies inside ``[a, b]``
    (another merged one too: a compaction of rolled segments, cut short). Its footer
    lists the originals' digests, so the verifier still checks the chain they formed;
    the leftovers themselves are redundant copies and are never read.
    """
    held = _held(files)
    return {f.path for f, h in zip(files, held, strict=True) if h} if held else set()


def _held(files: list[SegmentFile]) -> list[bool] | None:
    """Whether a merged segment holds each of ``files`` (:func:`covered`); None: no file
    is merged. Flags, not a set of paths: hashing a path runs Python, and a follower's
    listing asks it of thousands of files at every poll."""
    merged = sorted((f.first_seq, f.last_seq) for f in files if f.last_seq is not None)
    if not merged:
        return None
    starts = [a for a, _ in merged]
    reach = list(itertools.accumulate((b for _, b in merged), max))  # farthest end so far
    place = {r: i for i, r in enumerate(merged)}
    out = []
    for f in files:
        first = f.first_seq
        if f.last_seq is None:  # one flush: held when a merged range reaches it
            i = bisect.bisect_right(starts, first) - 1
            out.append(i >= 0 and reach[i] >= first)
            continue
        # another merged range [a, b] with a <= first and last <= b: one sorted before
        # this one (a <= first) reaching its last, or one after it starting where it
        # does (then longer). A search, not a look at every merged range: a writer rolls
        # every 256 flushes, and a follower lists the pairs of all its rolls at every poll
        # (about 6,000 a writer at step 100,000)
        i = place[(first, f.last_seq)]
        longer = bisect.bisect_right(starts, first) > i + 1
        out.append(longer or (i > 0 and reach[i - 1] >= f.last_seq))
    return out


def _path_kind(path: Path) -> int:
    """The ``stat`` file type of ``path`` itself (a symbolic link is reported as one)."""
    return stat.S_IFMT(path.lstat().st_mode)


def _entry_kind(entry: os.DirEntry[str]) -> int:
    """The file type of a listed entry itself (a symbolic link is reported as one), from the
    directory listing: no ``stat`` per file (a follower lists thousands at every poll)."""
    # the common case first: nearly every entry is a segment file
    if entry.is_file(follow_symlinks=False):
        return stat.S_IFREG
    if entry.is_dir(follow_symlinks=False):
        return stat.S_IFDIR
    if entry.is_symlink():
        return stat.S_IFLNK
    return stat.S_IFMT(entry.stat(follow_symlinks=False).st_mode)


def _entries(folder: Path) -> list[os.DirEntry[str]]:
    """The entries of ``folder``, sorted by name."""
    named = _named_entries(folder)
    return [named[name] for name in sorted(named)]  # strings sort in C; entries by key do not


def _named_entries(folder: Path) -> dict[str, os.DirEntry[str]]:
    """The entries of ``folder``, by name (in the directory's order)."""
    with os.scandir(folder) as it:
        return {e.name: e for e in it}


_PLAIN_FILE = operator.methodcaller("is_file", follow_symlinks=False)
"""Whether a listed entry is a plain file itself (from the listing: no ``stat``)."""


@dataclass(frozen=True)
class WriterListed:
    """One writer folder's segment files as a listing found them."""

    files: dict[str, SegmentFile]
    """Every segment file, by name, in name order."""
    kept: tuple[SegmentFile, ...]
    """The files no merged segment holds, by first sequence number (the listed ones)."""
    held: tuple[Path, ...]
    """The files a merged segment holds, in name order (see :func:`covered`)."""
    reach: int
    """The farthest last sequence number of the merged segments (-1: none)."""


@dataclass
class ListedBefore:
    """The segment files one reader listed last time, by writer folder.

    A follower lists thousands of segments at every poll, nearly all of them listed
    before: building each one's path and reading its name again cost a poll 15-25 ms,
    and going through each name again in Python 3-4 ms of its 95 at step 99,000 (9,100
    files: those rolls merged stay a roll longer). A file's :class:`SegmentFile` follows
    from its folder and name alone, so one listed again is reused (the same path object:
    its hash and string are computed once); a folder that only gained single flushes
    after its last name is listed from the last listing and its new names alone. Only
    what the last listing held is kept.
    """

    writers: dict[str, WriterListed] = field(default_factory=dict)

    @property
    def files(self) -> dict[str, dict[str, SegmentFile]]:
        """Writer folder name -> file name -> the file as listed."""
        return {name: listed.files for name, listed in self.writers.items()}


def list_segments(
    run_dir: str | os.PathLike[str],
    *,
    allow_empty: bool = False,
    before: ListedBefore | None = None,
) -> SegmentListing:
    """List a run's segments; raise a one-line error naming the first unexpected entry.

    Inside ``events/`` everything must be what a writer leaves: writer folders (not
    links) holding plain segment files named by their first sequence number, and plain
    temp files of cut-short flushes. A symbolic link anywhere below the run directory
    is refused: a run's evidence must be inside it. ``allow_empty`` accepts a directory
    with no segment (or no ``events/`` folder at all) and returns an empty listing;
    without it that is an :class:`UnusableInputError`. ``before``: what the caller
    listed last time (updated to this listing), whose files are reused.
    """
    root = Path(run_dir)
    events = events_dir(root)
    if not root.exists():
        if allow_empty:
            return SegmentListing(root, MappingProxyType({}), ())
        raise UnusableInputError(f"{root}: no such run directory")
    if not root.is_dir():
        raise UnusableInputError(f"{root}: not a directory")
    if events.is_symlink():
        raise UnusableInputError(
            f"{events}: is a symbolic link; a run's segments must be inside its directory"
        )
    if not events.is_dir():
        if allow_empty and not events.exists():
            return SegmentListing(root, MappingProxyType({}), ())
        raise UnusableInputError(f"{root}: not a run directory (no {EVENTS_DIR}/ folder)")
    writers: dict[str, tuple[SegmentFile, ...]] = {}
    torn: list[Path] = []
    held: list[Path] = []
    known = before.writers if before is not None else {}
    seen: dict[str, WriterListed] = {}
    for entry in _entries(events):
        folder = events / entry.name
        if _entry_kind(entry) != stat.S_IFDIR:
            raise UnusableInputError(f"{folder}: unexpected entry in {EVENTS_DIR}/")
        entries = _named_entries(folder)
        was = known.get(entry.name)
        listed = _grown(folder, entries, was, torn) if was is not None else None
        if listed is None:
            listed = _listed_anew(folder, entries, was, torn)
        seen[entry.name] = listed
        held += listed.held
        if listed.kept:
            writers[folder.name] = listed.kept
    if not writers and not allow_empty:
        raise UnusableInputError(f"{root}: the run has no event segments")
    if before is not None:
        before.writers = seen
    # folders and their files were walked in name order: torn and held are sorted already
    # (sorting thousands of Paths again cost a follower's poll 80 ms)
    return SegmentListing(root, MappingProxyType(writers), tuple(torn), tuple(held))


def _grown(
    folder: Path, entries: dict[str, os.DirEntry[str]], was: WriterListed, torn: list[Path]
) -> WriterListed | None:
    """The folder's listing from ``was`` and its new names, when it only gained single
    flushes named after every file it held (a writer's new flushes; temp files too) and
    every entry is a plain file; else None (a roll merged or removed some: list it anew)."""
    files = was.files
    if not entries.keys() >= files.keys() or not all(map(_PLAIN_FILE, entries.values())):
        return None
    new = sorted(entries.keys() - files.keys())
    last = next(reversed(files), "")
    names = [n for n in new if not n.startswith(TEMP_PREFIX)]
    if any(RANGE_SEP in n or n <= last for n in names):
        return None
    # after every name before: each starts at or after every merged segment, and one
    # reaches it exactly when the farthest does
    added = [_segment_file(folder / n, stat.S_IFREG) for n in names]
    torn += (folder / n for n in new if n.startswith(TEMP_PREFIX))
    return WriterListed(
        {**files, **{f.path.name: f for f in added}},
        was.kept + tuple(f for f in added if f.first_seq > was.reach),
        was.held + tuple(f.path for f in added if f.first_seq <= was.reach),
        was.reach,
    )


def _listed_anew(
    folder: Path,
    entries: dict[str, os.DirEntry[str]],
    was: WriterListed | None,
    torn: list[Path],
) -> WriterListed:
    """The folder's listing, each entry checked in name order (the first unexpected one
    raises); the files ``was`` lists that are still plain files are reused."""
    known = was.files if was is not None else {}
    files: dict[str, SegmentFile] = {}
    for name in sorted(entries):
        item = entries[name]
        again = known.get(name)
        if again is not None and item.is_file(follow_symlinks=False):  # still a plain file
            files[name] = again
            continue
        path = folder / name
        if name.startswith(TEMP_PREFIX):
            if _entry_kind(item) != stat.S_IFREG:
                raise UnusableInputError(f"{path}: unexpected entry in a writer folder")
            torn.append(path)
        else:
            files[name] = _segment_file(path, _entry_kind(item))
    listed = list(files.values())
    flags = _held(listed) or [False] * len(listed)
    kept = [f for f, h in zip(listed, flags, strict=True) if not h]
    kept.sort(key=lambda f: f.first_seq)
    ends = [f.last_seq for f in listed if f.last_seq is not None]
    return WriterListed(
        files,
        tuple(kept),
        tuple(f.path for f, h in zip(listed, flags, strict=True) if h),
        max(ends, default=-1),
    )


def _segment_file(path: Path, kind: int) -> SegmentFile:
    """The listed segment at ``path`` (of file type ``kind``); raises a one-line error when
    it is not a plain file named as a segment."""
    if not path.name.endswith(SEGMENT_SUFFIX):
        raise UnusableInputError(f"{path}: unexpected file in a writer folder")
    if kind == stat.S_IFLNK:
        raise CorruptSegmentError(path, "is a symbolic link; segments must be plain files")
    if kind != stat.S_IFREG:
        raise CorruptSegmentError(path, "is not a regular file")
    seqs = segment_range(path.name)
    if seqs is None:
        reason = f"name is not a {SEQ_DIGITS}-digit sequence number (or a range of two)"
        raise CorruptSegmentError(path, reason)
    return SegmentFile(path, path.parent.name, *seqs)


RELISTS = 8
"""How many times a reader that listed the run itself lists it again when a listed segment
vanished before it was read (a writer rolls every 256 flushes: one re-list almost always
does; more means the run is being rewritten faster than it can be read)."""


_T = TypeVar("_T")


def relisting(read: Callable[[], _T]) -> _T:
    """``read()``, called again (up to :data:`RELISTS` times) while it raises
    :class:`SegmentVanishedError`: ``read`` lists the run itself, so each call sees the
    merged segment that now holds a removed original (and a segment that vanished with
    nothing holding it as a sequence gap, which FT001 reports)."""
    for _ in range(RELISTS):
        try:
            return read()
        except SegmentVanishedError:
            continue
    return read()


RUN_ID = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,127}$")
"""What a run id looks like: ftaudit writes 32 hex digits; a user may choose another name."""


def read_run_id(root: Path) -> str:
    """The run id that ``RUN_DIR/run.json`` holds; raises :class:`RunFileError` naming the
    file and what is wrong with it (missing, not JSON, no string ``run_id``)."""
    path = root / RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunFileError(f"{path}: missing (every run directory has one)") from None
    except (OSError, ValueError) as exc:
        raise RunFileError(f"{path}: not readable JSON ({exc})") from None
    run_id = data.get("run_id") if isinstance(data, dict) else None
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise RunFileError(
            f"{path}: 'run_id' must be a string of letters, digits, '.', '_' or '-' "
            f"(at most 128), not {run_id!r}"
        )
    return run_id


def claimed_incarnations(run_dir: str | os.PathLike[str]) -> set[int]:
    """The incarnation numbers launches claimed (``RUN_DIR/incarnations/<k>``)."""
    folder = Path(run_dir) / INCARNATIONS_DIR
    if not folder.is_dir():
        return set()
    return {int(p.name) for p in folder.iterdir() if p.name.isdigit() and p.is_dir()}


def list_manifests(run_dir: str | os.PathLike[str]) -> tuple[Path, ...]:
    """The dataset manifests a run keeps (``manifests/<digest>.parquet``), by name.

    Only plain files count: a symbolic link, a folder or a temp file of a cut-short write
    is no manifest of the run (a declared digest without its file is FT008's to report).
    """
    folder = Path(run_dir) / MANIFESTS_DIR
    try:
        if _path_kind(folder) != stat.S_IFDIR:
            return ()
    except FileNotFoundError:
        return ()
    return tuple(
        path
        for path in sorted(folder.iterdir())
        if path.name.endswith(SEGMENT_SUFFIX)
        and not path.name.startswith(TEMP_PREFIX)
        and _path_kind(path) == stat.S_IFREG
    )
