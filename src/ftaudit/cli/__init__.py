"""The command line: ``ft-verify`` and ``ftaudit`` (typer), one module per command.

Modules here import only typer at the top; every heavy import (DuckDB, pyarrow, rich,
the verifier) happens inside a command body, so ``--help`` answers at once.
"""
