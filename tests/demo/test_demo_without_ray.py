"""``ftaudit demo`` in a core install (no Ray): a one-line hint, a distinct exit code, and
nothing left behind. Ray is hidden by an import blocker, not uninstalled."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ftaudit.cli import exit_codes

BLOCKER = textwrap.dedent(
    """
    import sys

    class HideRay:
        def find_spec(self, name, path=None, target=None):
            if name == "ray" or name.startswith("ray."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, HideRay())
    """
)


def test_demo_without_ray_says_what_to_install(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(BLOCKER)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
        "TMPDIR": str(temp),
        "NO_COLOR": "1",
    }
    run_dir = tmp_path / "run"
    for args in ([str(run_dir)], []):  # a given directory, and the default temporary one
        done = subprocess.run(
            [sys.executable, "-c", "from ftaudit.cli.app import main; main()", "demo", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert done.returncode == exit_codes.MISSING_EXTRA, done.stderr
        assert "install ftaudit[ray]" in done.stderr and "internal error" not in done.stderr
        assert done.stderr.count("\n") == 1 and done.stdout == ""
        assert not run_dir.exists() and list(temp.iterdir()) == []


def test_demo_whose_ray_cannot_start_says_so(tmp_path: Path) -> None:
    """A machine where Ray cannot start (here its temp dir is under a file; on a loaded
    machine its node can miss the GCS's 30 s) is not an internal error to report."""
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    env = {**os.environ, "RAY_TMPDIR": str(not_a_dir / "ray"), "NO_COLOR": "1"}
    demo = [sys.executable, "-c", "from ftaudit.cli.app import main; main()", "demo"]
    done = subprocess.run(
        [*demo, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == exit_codes.UNUSABLE, done.stderr
    assert "error: Ray did not start: NotADirectoryError" in done.stderr
    assert "internal error" not in done.stderr
