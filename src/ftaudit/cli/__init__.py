"""The command line: ``ft-verify`` and ``ftaudit`` (typer), one module per command.

Modules here import only typer at the top; every heavy import (DuckDB, pyarrow, rich,
the verifier) happens inside a command body, so ``--help`` answers at once. ``ft-verify``'s
entry point (``verify_cmd``) imports no typer at all: a gate's plain command line is
parsed by ``verify_options`` and run by ``verify_run``; typer (``verify_app``) answers
``--help``, usage errors and ``ftaudit verify``.
"""
