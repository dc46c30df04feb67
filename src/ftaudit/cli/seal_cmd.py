"""``ftaudit seal RUN_DIR -o SEAL``: every writer's head, to keep outside the run.

``ft-verify RUN_DIR --manifest SEAL`` later checks the run against it. With a key
(``$FTAUDIT_HMAC_KEY``, ``$FTAUDIT_HMAC_KEY_FILE`` or ``--key-file``) the seal is signed
(HMAC-SHA256); the key itself is never written or shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ftaudit.cli import exit_codes
from ftaudit.cli.terminal import guarded, say


def seal(
    run_dir: Annotated[
        Path,
        typer.Argument(metavar="RUN_DIR", help="The run directory (the folder holding events/)."),
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="SEAL", help="The seal file to write (JSON)."),
    ],
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file",
            metavar="FILE",
            help="Sign with the HMAC key in FILE (default: $FTAUDIT_HMAC_KEY_FILE or "
            "$FTAUDIT_HMAC_KEY; unsigned when none is set).",
        ),
    ] = None,
) -> None:
    """Seal a run: record every writer's head in SEAL, to keep outside the run.

    Exit codes: 0 written, 2 unusable run directory, key file or output.
    """
    from ftaudit.verifier.seal import load_key, seal_run, write_seal

    key = guarded(lambda: load_key(key_file))
    sealed = guarded(lambda: seal_run(run_dir, key))
    guarded(lambda: write_seal(sealed, output))
    signed = "signed (HMAC-SHA256)" if sealed.mac else "unsigned (no key)"
    say(
        f"ftaudit seal: {len(sealed.heads)} writers, {sealed.segments} segments of run "
        f"{sealed.run_id}; {signed}; written to {output}"
    )
    raise typer.Exit(exit_codes.OK)


__all__ = ["seal"]
