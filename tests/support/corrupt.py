"""Ways to damage a run directory, and the verdict ``ft-verify`` must give on the result.

Each corruption takes a run directory (a copy of a clean run that verifies with exit 0)
and a ``random.Random`` (hypothesis drives it), damages the run in place and returns a
one-line description. :func:`verdict` runs ``ft-verify`` in-process and checks that it
exits 1 or 2 with a clear message, never 0 and never with a traceback.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from typer.testing import CliRunner

from ftaudit.cli.verify_cmd import build_app
from ftaudit.eventlog.record import ENVELOPE_COLUMNS
from ftaudit.eventlog.segment import DIGEST_KEY, DIGEST_PLACEHOLDER, write_atomically

Corruption = Callable[[Path, random.Random], str]


def segments(run: Path) -> list[Path]:
    """Every sealed segment of a run, sorted."""
    return sorted((run / "events").glob("*/*.parquet"))


def writers(run: Path) -> list[Path]:
    return sorted(p for p in (run / "events").iterdir() if p.is_dir())


def write_foreign_parquet(run: Path) -> Path:
    """A valid Parquet file that no ftaudit writer made, named like a segment."""
    target = writers(run)[0] / "000000999999.parquet"
    pq.write_table(pa.table({"loss": [0.5, 0.25], "step": [0, 1]}), target)
    return target


def leave_torn_flush(run: Path) -> Path:
    """The temp file a writer leaves when it is killed mid-flush (a warning, not an error)."""
    torn = writers(run)[0] / ".000000999999.parquet.4242.tmp"
    torn.write_bytes(b"PAR1 half a row group")
    return torn


def vouched_for(run: Path) -> list[Path]:
    """Segments followed by a later segment of their writer, or named by a checkpoint."""
    from ftaudit.eventlog import read_records
    from ftaudit.eventlog.events import CheckpointSaved

    heads = {
        (writer, seq)
        for r in read_records(run)
        if isinstance(r.event, CheckpointSaved)
        for writer, seq in r.event.writers.items()
    }
    out = []
    for folder in writers(run):
        segs = sorted(folder.glob("*.parquet"))
        out += segs[:-1]
        last = pq.read_metadata(segs[-1]).metadata or {}
        if (folder.name, int(last.get(b"ftaudit.last_seq", b"-1"))) in heads:
            out.append(segs[-1])
    return out


def _pick(run: Path, rng: random.Random) -> Path:
    return rng.choice(segments(run))


def _outside(run: Path, name: str) -> Path:
    """A path next to the run directory (outside it), unique per run copy."""
    return run.parent / f"outside-{name}"


def truncate(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    data = seg.read_bytes()
    cut = rng.randrange(0, len(data))
    seg.write_bytes(data[:cut])
    return f"truncate {seg.name} to {cut} of {len(data)} bytes"


def _flip(run: Path, rng: random.Random, lo: float, hi: float, where: str) -> str:
    seg = _pick(run, rng)
    data = bytearray(seg.read_bytes())
    flips = []
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(int(lo * len(data)), max(int(lo * len(data)) + 1, int(hi * len(data))))
        bit = rng.randrange(8)
        data[at] ^= 1 << bit
        flips.append(f"{at}.{bit}")
    if bytes(data) == seg.read_bytes():  # two flips of one bit cancelled out
        data[0] ^= 1
    seg.write_bytes(bytes(data))
    return f"flip bits {', '.join(flips)} ({where}) of {seg.parent.name[:8]}/{seg.name}"


def bitflip_anywhere(run: Path, rng: random.Random) -> str:
    return _flip(run, rng, 0.0, 1.0, "anywhere")


def bitflip_data(run: Path, rng: random.Random) -> str:
    return _flip(run, rng, 0.0, 0.5, "data pages")


def bitflip_footer(run: Path, rng: random.Random) -> str:
    return _flip(run, rng, 0.6, 1.0, "footer")


def garbage(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    data = bytearray(seg.read_bytes())
    start = rng.randrange(len(data))
    length = rng.randint(1, 64)
    for i in range(start, min(len(data), start + length)):
        data[i] ^= rng.randint(1, 255)
    seg.write_bytes(bytes(data))
    return f"overwrite {length} bytes at {start} of {seg.name}"


def empty(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    seg.write_bytes(b"")
    return f"empty {seg.name}"


def foreign_replace(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    n = rng.randint(0, 20)
    table = pa.table({"loss": [rng.random() for _ in range(n)], "step": list(range(n))})
    pq.write_table(table, seg)
    return f"replace {seg.name} with a foreign Parquet file of {n} rows"


def foreign_added(run: Path, rng: random.Random) -> str:
    folder = rng.choice(writers(run))
    target = folder / f"{rng.randint(0, 10**6):012d}.parquet"
    pq.write_table(pa.table({"x": [1, 2, 3]}), target)
    return f"add a foreign Parquet file {folder.name[:8]}/{target.name}"


def _rewrite(seg: Path, table: pa.Table, metadata: dict[bytes, bytes]) -> None:
    pq.write_table(table.replace_schema_metadata(metadata), seg, compression="zstd")


def load_segment(seg: Path) -> tuple[pa.Table, dict[bytes, bytes]]:
    table = pq.read_table(seg)
    return table, dict(pq.read_metadata(seg).metadata or {})


def _retype(
    seg: Path, table: pa.Table, meta: dict[bytes, bytes], column: str, target: pa.DataType
) -> None:
    """Rewrite ``seg`` with ``column`` cast to ``target`` (all NULL where no cast exists)."""
    i = table.schema.get_field_index(column)
    try:
        new = pc.cast(table.column(i), target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        new = pa.nulls(table.num_rows, target)
    _rewrite(seg, table.set_column(i, pa.field(column, target), new), meta)


def retype_envelope(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    table, meta = load_segment(seg)
    column = rng.choice(["seq", "step", "attempt", "incarnation", "ts", "writer", "type"])
    target = rng.choice([pa.string(), pa.float64(), pa.int32()])
    _retype(seg, table, meta, column, target)
    return f"envelope column {column} of {seg.name} as {target}"


def retype_payload(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    table, meta = load_segment(seg)
    payload = _payload(table)
    if not payload:
        return retype_envelope(run, rng)
    column = rng.choice(payload)
    target = rng.choice([pa.string(), pa.float64(), pa.int32(), pa.list_(pa.string())])
    _retype(seg, table, meta, column, target)
    return f"payload column {column} of {seg.name} as {target}"


def duplicate_renamed(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    target = seg.with_name(f"{int(seg.stem) + rng.randint(1, 50):012d}.parquet")
    if target.exists():
        target = seg.with_name(f"{int(seg.stem) + 1000:012d}.parquet")
    shutil.copyfile(seg, target)
    return f"copy {seg.name} to {target.name}"


def duplicate_other_writer(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    others = [w for w in writers(run) if w != seg.parent]
    target = rng.choice(others) / f"{rng.randint(100, 999):012d}.parquet"
    shutil.copyfile(seg, target)
    return f"copy {seg.name} into {target.parent.name[:8]}"


def duplicate_writer_folder(run: Path, rng: random.Random) -> str:
    folder = rng.choice(writers(run))
    target = folder.with_name(folder.name + "-copy")
    shutil.copytree(folder, target)
    return f"copy writer folder {folder.name[:8]}"


def symlink_segment(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    outside = _outside(run, seg.name)
    shutil.move(seg, outside)
    seg.symlink_to(outside)
    return f"{seg.name} is a symlink to a file outside the run"


def symlink_writer(run: Path, rng: random.Random) -> str:
    folder = rng.choice(writers(run))
    outside = _outside(run, folder.name)
    shutil.move(folder, outside)
    folder.symlink_to(outside, target_is_directory=True)
    return f"writer folder {folder.name[:8]} is a symlink outside the run"


def symlink_events(run: Path, rng: random.Random) -> str:
    events = run / "events"
    outside = _outside(run, "events")
    shutil.move(events, outside)
    events.symlink_to(outside, target_is_directory=True)
    return "events/ is a symlink outside the run"


def delete_middle(run: Path, rng: random.Random) -> str:
    folders = [w for w in writers(run) if len(list(w.glob("*.parquet"))) >= 3]
    folder = rng.choice(folders)
    seg = rng.choice(sorted(folder.glob("*.parquet"))[1:-1])
    seg.unlink()
    return f"delete {folder.name[:8]}/{seg.name}"


def swap(run: Path, rng: random.Random) -> str:
    folders = [w for w in writers(run) if len(list(w.glob("*.parquet"))) >= 2]
    a, b = rng.sample(sorted(rng.choice(folders).glob("*.parquet")), 2)
    tmp = a.with_name("swap")
    os.rename(a, tmp)
    os.rename(b, a)
    os.rename(tmp, b)
    return f"swap {a.name} and {b.name}"


def _edited(table: pa.Table, rng: random.Random) -> tuple[pa.Table, str]:
    """One event's step changed (or, in a one-row segment without a step, its timestamp)."""
    row = rng.randrange(table.num_rows)
    steps = table.column("step").to_pylist()
    steps[row] = (steps[row] or 0) + rng.randint(1, 5)
    i = table.schema.get_field_index("step")
    return table.set_column(i, table.schema.field(i), pa.array(steps, pa.int64())), f"row {row}"


def edit_event(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    table, meta = load_segment(seg)
    edited, which = _edited(table, rng)
    _rewrite(seg, edited, meta)
    return f"edit {which} of {seg.name} (digest left as it was)"


def edit_event_forged(run: Path, rng: random.Random) -> str:
    """Edit an event and recompute the segment's own digest: only the chain can tell, so the
    segment is one that a later segment or a checkpoint vouches for (not a writer's last
    segment after its last checkpoint: see docs/reliability.md)."""
    seg = rng.choice(vouched_for(run))
    table, meta = load_segment(seg)
    edited, which = _edited(table, rng)
    forge_digest(seg, edited, meta)
    return f"edit {which} of {seg.name} with a recomputed digest"


ID_SETS = (
    "witness_allocated.witness_ids",
    "witness_allocated.sample_indices",
    "witness_allocated.stale_ids",
    "witness_snapshot.nonzero_ids",
    "witness_snapshot.stale_ids",
)
"""The id-set (``IntRuns``) columns a forger can fill with well-formed nonsense."""

FORGED_RUNS = {
    "huge": {"starts": [0], "lengths": [10**12]},
    "mismatched": {"starts": [0, 7], "lengths": [3]},
    "negative": {"starts": [-5], "lengths": [3]},
    "empty_run": {"starts": [2], "lengths": [0]},
}


def forge_digest(seg: Path, table: pa.Table, meta: dict[bytes, bytes]) -> None:
    """Rewrite ``seg`` with a digest recomputed over its new bytes (what a forger does)."""
    meta[DIGEST_KEY.encode()] = DIGEST_PLACEHOLDER.encode()
    tmp = seg.with_name("forged.parquet")
    write_atomically(table.replace_schema_metadata(meta), tmp, fsync=False)
    os.replace(tmp, seg)


def forge_id_set(run: Path, rng: random.Random, column: str, value: dict[str, list[int]]) -> str:
    """Set one row's id set in ``column`` to ``value``, digest recomputed."""
    for seg in rng.sample(segments(run), len(segments(run))):
        table, meta = load_segment(seg)
        if column not in table.column_names:
            continue
        values = table.column(column).to_pylist()
        rows = [i for i, v in enumerate(values) if v is not None]
        row = rng.choice(rows)
        values[row] = value
        i = table.schema.get_field_index(column)
        field = table.schema.field(i)
        forge_digest(seg, table.set_column(i, field, pa.array(values, field.type)), meta)
        return f"forge {column} of row {row} of {seg.name} as {value}"
    raise AssertionError(f"no segment holds {column}")


def forged_id_range(run: Path, rng: random.Random) -> str:
    """A well-formed segment (digest recomputed) whose id set is a forged range."""
    kind = rng.choice(sorted(FORGED_RUNS))
    return forge_id_set(run, rng, rng.choice(ID_SETS), FORGED_RUNS[kind])


def dropped_column(run: Path, rng: random.Random) -> str:
    """A payload column removed with pyarrow, digest recomputed: the segment is well formed
    but lacks a column its schema version holds, so its rows would read as defaults."""
    seg = rng.choice([s for s in segments(run) if _payload(load_segment(s)[0])])
    table, meta = load_segment(seg)
    column = rng.choice(_payload(table))
    forge_digest(seg, table.drop_columns([column]), meta)
    return f"drop column {column} of {seg.name} with a recomputed digest"


def _payload(table: pa.Table) -> list[str]:
    return [n for n in table.column_names if n not in ENVELOPE_COLUMNS]


def reorder_rows(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    table, meta = load_segment(seg)
    if table.num_rows < 2:
        return edit_event(run, rng)
    seqs = table.column("seq").to_pylist()
    i = table.schema.get_field_index("seq")
    j, k = rng.sample(range(table.num_rows), 2)
    seqs[j], seqs[k] = seqs[k], seqs[j]
    _rewrite(seg, table.set_column(i, table.schema.field(i), pa.array(seqs, pa.int64())), meta)
    return f"swap the order of rows {j} and {k} of {seg.name}"


def remove_row(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    table, meta = load_segment(seg)
    row = rng.randrange(table.num_rows)
    kept = pa.concat_tables([table.slice(0, row), table.slice(row + 1)])
    _rewrite(seg, kept, meta)
    return f"remove row {row} of {seg.name}"


def insert_row(run: Path, rng: random.Random) -> str:
    seg = _pick(run, rng)
    table, meta = load_segment(seg)
    row = rng.randrange(table.num_rows)
    _rewrite(seg, pa.concat_tables([table, table.slice(row, 1)]), meta)
    return f"insert a copy of row {row} into {seg.name}"


CORRUPTIONS: dict[str, Corruption] = {
    f.__name__: f
    for f in (
        truncate,
        bitflip_anywhere,
        bitflip_data,
        bitflip_footer,
        garbage,
        empty,
        foreign_replace,
        foreign_added,
        retype_envelope,
        retype_payload,
        duplicate_renamed,
        duplicate_other_writer,
        duplicate_writer_folder,
        symlink_segment,
        symlink_writer,
        symlink_events,
        delete_middle,
        swap,
        edit_event,
        edit_event_forged,
        reorder_rows,
        remove_row,
        insert_row,
        forged_id_range,
        dropped_column,
    )
}


@dataclass(frozen=True)
class Verdict:
    code: int
    message: str
    """The one error line (exit 2) or the first violation line of the report (exit 1)."""


class BadVerdict(AssertionError):
    pass


_runner = CliRunner()
_app = build_app()


def verdict(run: Path) -> Verdict:
    """Run ``ft-verify RUN`` in-process; check the exit code is 1 or 2 and the message clear."""
    result = _runner.invoke(_app, [str(run)])
    shown = f"exit {result.exit_code}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise BadVerdict(f"ft-verify raised {result.exception!r}\n{shown}")
    if "Traceback" in result.stdout + result.stderr:
        raise BadVerdict(f"a traceback reached the user\n{shown}")
    if result.exit_code == 2:
        err = result.stderr
        if not err.startswith("error: ") or err.count("\n") != 1 or result.stdout:
            raise BadVerdict(f"exit 2 without exactly one error line\n{shown}")
        if "internal error" in err:
            raise BadVerdict(f"an internal error (a bug), not a diagnosis\n{shown}")
        return Verdict(2, err.strip())
    if result.exit_code == 1:
        lines = [line for line in result.stdout.splitlines() if "FT0" in line and "fail" in line]
        if not lines:
            raise BadVerdict(f"exit 1 without a failing rule in the report\n{shown}")
        return Verdict(1, lines[0].strip())
    raise BadVerdict(f"ft-verify must exit 1 or 2 on a damaged run\n{shown}")


RUN_NAMES = {  # a run's folder name -> a clean sibling its name would match as a glob
    "run": None,
    "g[1]": "g1",
    "g[!x]": "gy",
    "g*": "gz",
    "g?": "gq",
    "**": "sibling",
    "g{a,b}": "ga",
    "~": None,
    "$HOME": None,
    "it's a run": None,
    'say "run"': None,
}
"""Run names with shell and glob metacharacters: the damaged run, never the clean
sibling, must be judged."""


def damage_copy(base: Path, kind: str, rng: random.Random) -> tuple[str, Verdict]:
    """Copy the clean run ``base`` under a name ``rng`` picks (a clean copy beside it when
    that name is also a glob), damage the copy with ``kind``, and judge it."""
    with tempfile.TemporaryDirectory(prefix="ftaudit-fuzz-") as scratch:
        name = rng.choice(sorted(RUN_NAMES))
        run = Path(scratch) / name
        shutil.copytree(base, run, symlinks=True)
        decoy = RUN_NAMES[name]
        if decoy is not None:
            shutil.copytree(base, Path(scratch) / decoy, symlinks=True)
        what = f"{CORRUPTIONS[kind](run, rng)} (run named {name!r})"
        try:
            return what, verdict(run)
        except BadVerdict as exc:
            raise BadVerdict(f"{kind}: {what}: {exc}") from None
