"""``ftaudit manifest OUT``: fingerprint every item of a dataset into a manifest file.

The dataset comes from Python (``--dataset module:attr`` or ``path/to/file.py:attr``: a
map-style dataset, an iterable with a stable order, or a function returning one) or
from a Parquet file (``--parquet FILE --column input_ids``: one item per row). Stdout
gets one line, ``DIGEST SIZE PATH``; progress goes to stderr on a terminal.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import abort, emit, guarded, say

if TYPE_CHECKING:
    from ftaudit.dataset.build import Progress, WrittenManifest


def manifest(
    output: Annotated[
        Path, typer.Argument(metavar="OUT", help="The manifest file to write (Parquet).")
    ],
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            metavar="MODULE:ATTR",
            help="A dataset object, or a function returning one: module:attr or file.py:attr.",
        ),
    ] = None,
    parquet: Annotated[
        Path | None,
        typer.Option("--parquet", metavar="FILE", help="A Parquet file: one item per row."),
    ] = None,
    column: Annotated[
        str | None, typer.Option(help="With --parquet: the column the model receives.")
    ] = None,
    field: Annotated[
        str | None,
        typer.Option(help="With --dataset: the key of dict items (e.g. input_ids)."),
    ] = None,
    chunk_size: Annotated[int, typer.Option(min=1, help="Items fingerprinted per chunk.")] = 4096,
) -> None:
    """Write the manifest of a dataset: every item's content fingerprint, its size, a digest.

    Exit codes: 0 written, 2 the dataset or the output cannot be used.
    """
    if (dataset is None) == (parquet is None):
        abort("give exactly one of --dataset MODULE:ATTR and --parquet FILE", exit_codes.UNUSABLE)
    source, label = guarded(lambda: _load(dataset, parquet, column))
    with _progress() as progress:
        written = guarded(
            lambda: _write(
                source, output, field=field, chunk=chunk_size, progress=progress, label=label
            )
        )
    emit(f"{written.digest} {written.size} {written.path}\n", None)
    say(f"ftaudit manifest: {written.size} items of {label}, digest {written.digest[:16]}")


def _write(
    source: Any,
    output: Path,
    *,
    field: str | None,
    chunk: int,
    progress: Progress | None,
    label: str,
) -> WrittenManifest:
    """Stream the manifest; the dataset's own errors become one-line manifest errors (an
    ``OSError``, of the output or of a file the dataset reads, already is one, naming it)."""
    from ftaudit.dataset.build import write_manifest_of

    try:
        return write_manifest_of(
            source, output, field=field, chunk_size=chunk, progress=progress, description=label
        )
    except (TypeError, KeyError, ValueError) as exc:
        from ftaudit.dataset import ManifestError

        raise ManifestError(f"{label}: {exc.args[0] if exc.args else exc}") from None


def _load(dataset: str | None, parquet: Path | None, column: str | None) -> tuple[Any, str]:
    from ftaudit.dataset import ManifestError

    if parquet is not None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if column is None:
            raise ManifestError(f"{parquet}: give --column, the column the model receives")
        try:
            table = pq.read_table(parquet, columns=[column])
        except FileNotFoundError:
            raise ManifestError(f"{parquet}: no such file") from None
        except (OSError, pa.ArrowException) as exc:
            raise ManifestError(f"{parquet}: cannot read column {column!r} ({exc})") from None
        return table.column(column).to_pylist(), f"{parquet} column {column}"
    assert dataset is not None
    return _import(dataset), dataset


def _import(spec: str) -> Any:
    import importlib
    import importlib.util
    import sys

    from ftaudit.dataset import ManifestError

    where, _, attr = spec.rpartition(":")
    if not where or not attr:
        raise ManifestError(f"{spec}: expected MODULE:ATTR or FILE.py:ATTR")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ManifestError(f"{where}: no such file")
            loaded = importlib.util.spec_from_file_location(path.stem, path)
            assert loaded is not None and loaded.loader is not None
            module = importlib.util.module_from_spec(loaded)
            sys.modules[path.stem] = module
            loaded.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
        obj = getattr(module, attr)
    except ManifestError:
        raise
    except AttributeError:
        raise ManifestError(f"{where} has no attribute {attr!r}") from None
    except Exception as exc:  # the user's module failed to import: say how, in one line
        raise ManifestError(f"{where}: import failed: {type(exc).__name__}: {exc}") from None
    is_data = hasattr(obj, "__len__") or hasattr(obj, "__iter__")
    if isinstance(obj, type) or (callable(obj) and not is_data):
        obj = obj()
    return obj


@contextmanager
def _progress() -> Iterator[Progress | None]:
    """A bar on stderr when it is a terminal; nothing otherwise."""
    from ftaudit.cli.terminal import Terminal

    if not Terminal.detect().progress:
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress as Bar

    with Bar(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("fingerprinting", total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)
