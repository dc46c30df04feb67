"""One command for a GPU machine without network: install the carried wheels, run both checks.

    python3 benchmarks/run_gpu_checks.py                  # from a fresh checkout, on the GPU
    python3 benchmarks/run_gpu_checks.py --json $OUT/gpu_checks.json

Needs Python 3.12 with a CUDA torch (and pip) already installed, and the wheels that
``scripts/gpu_wheels_download.sh`` put into ``gpu_wheels/`` (carry that folder along).
Only the standard library is used until the wheels are in:

1. every requirement of ``benchmarks/gpu_requirements.txt`` that the machine lacks, or
   holds older than ftaudit's floor (``pyproject.toml``; else the pin), or, for
   megatron-core, pydantic and pydantic-core, in another version than the pin, is
   installed offline with ``pip --no-index --no-deps --target .gpu-site`` (the machine's
   own packages are left alone);
2. the writer's one compiled module (``src/ftaudit/eventlog/hotpath.c``) is built in
   place for this Python unless a build for it is already there (``setup.py build_ext
   --inplace``: a C compiler and setuptools, which a CUDA image has);
3. ``benchmarks/gpu_witness_check.py`` and ``benchmarks/gpu_megatron_check.py`` run one
   after the other with ``.gpu-site`` and ``src`` on ``PYTHONPATH``, each under a time
   limit (the defaults fit both in under 5 minutes on one H200);
4. one table lists every check of both with PASS/FAIL and the measured overheads; the
   exit status is 0 only if every check passed.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIREMENTS = ROOT / "benchmarks" / "gpu_requirements.txt"
EXACT = {"megatron-core", "pydantic", "pydantic-core"}
"""Requirements whose installed version must be the pin: the tested megatron-core, and
pydantic with the one pydantic-core it is built against (the two are installed together)."""


def version_key(version: str) -> tuple[int, ...]:
    """The leading numeric release of a version (``2.5.2rc1`` -> ``(2, 5, 2)``)."""
    parts = []
    for part in version.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def project_floors(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, str]:
    """``name -> minimum`` of ftaudit's own dependencies (``pyarrow>=16`` -> ``16``)."""
    floors = {}
    for spec in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        match = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", spec)
        if match:
            floors[match[1].lower().replace("_", "-")] = match[2]
    return floors


@dataclass(frozen=True)
class Requirement:
    name: str
    version: str
    floor: str | None = None
    """The oldest installed version accepted (ftaudit's own floor), else the pin."""

    def satisfied_by(self, installed: str | None) -> bool:
        if installed is None:
            return False
        if self.name in EXACT:
            return installed == self.version
        return version_key(installed) >= version_key(self.floor or self.version)


@dataclass
class CheckRun:
    """One check script's outcome: its checks (name -> passed), figures, how it ended."""

    script: str
    checks: dict[str, bool] = field(default_factory=dict)
    timing: dict[str, object] = field(default_factory=dict)
    status: str = "not run"
    seconds: float = 0.0


def read_requirements(path: Path = REQUIREMENTS) -> list[Requirement]:
    floors = project_floors()
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            if not version:
                raise SystemExit(f"{path}: {line!r} is not pinned as name==version")
            name = name.strip().lower()
            out.append(Requirement(name, version.strip(), floors.get(name)))
    return out


def installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def wheel_of(requirement: Requirement, wheels: Path) -> Path | None:
    """The wheel of ``requirement`` in ``wheels`` (names normalised as in wheel files)."""
    stem = re.sub(r"[-_.]+", "_", requirement.name)
    for path in wheels.glob("*.whl"):
        name, _, rest = path.name.partition("-")
        if re.sub(r"[-_.]+", "_", name).lower() == stem and rest.startswith(
            f"{requirement.version}-"
        ):
            return path
    return None


def install_missing(wheels: Path, site: Path, requirements: Path = REQUIREMENTS) -> list[str]:
    """Install what the machine lacks into ``site``; the ``name==version`` installed."""
    wanted = read_requirements(requirements)
    missing = [r for r in wanted if not r.satisfied_by(installed_version(r.name))]
    if not missing:
        return []
    if not wheels.is_dir():
        raise SystemExit(
            f"{wheels}: no wheel folder, but {', '.join(r.name for r in missing)} are missing: "
            "run scripts/gpu_wheels_download.sh on a machine with network and carry the folder"
        )
    absent = [r for r in missing if not wheel_of(r, wheels)]
    if absent:
        raise SystemExit(
            f"{wheels}: no wheel for {', '.join(f'{r.name}=={r.version}' for r in absent)}, "
            "which this machine lacks: download it with scripts/gpu_wheels_download.sh "
            "(without GPU_WHEELS_SKIP naming it) and carry it along"
        )
    specs = [f"{r.name}=={r.version}" for r in missing]
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet"]
    command += ["--find-links", str(wheels), "--target", str(site), "--upgrade", *specs]
    subprocess.run(command, check=True)
    return specs


def build_hotpath(root: Path = ROOT) -> bool:
    """Build the writer's C module in place for this interpreter if no build of it is
    there (a fresh checkout has none: ``*.so`` is ignored); True if it was built."""
    package = root / "src" / "ftaudit" / "eventlog"
    if any((package / f"hotpath{s}").is_file() for s in importlib.machinery.EXTENSION_SUFFIXES):
        return False
    with tempfile.TemporaryDirectory() as build:
        command = [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace"]
        command += ["--build-temp", f"{build}/temp", "--build-lib", f"{build}/lib"]
        subprocess.run(command, cwd=root, check=True)
    return True


def run_check(script: str, args: list[str], env: dict[str, str], timeout_s: float) -> CheckRun:
    """Run one check script; its results come from the JSON file it writes."""
    run = CheckRun(script)
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        command = [sys.executable, str(ROOT / "benchmarks" / script), *args, "--json", str(result)]
        start = time.monotonic()
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, timeout=timeout_s)
            run.status = "exit 0" if done.returncode == 0 else f"exit {done.returncode}"
        except subprocess.TimeoutExpired:
            run.status = f"timed out after {timeout_s:.0f} s"
        run.seconds = time.monotonic() - start
        if result.is_file():
            report = json.loads(result.read_text())
            run.checks = {str(k): bool(v) for k, v in report.get("checks", {}).items()}
            run.timing = report.get("timing", {})
    return run


def overheads(run: CheckRun) -> list[tuple[str, str]]:
    """The witness's measured cost, as (what, value) rows of the table."""
    rows = []
    for key, value in run.timing.items():
        if isinstance(value, dict) and "overhead_pct" in value:  # the Megatron check
            rows.append((f"fwd+bwd overhead, {key} kernels", f"{value['overhead_pct']:.2f} %"))
        elif key.endswith("_overhead_pct") and isinstance(value, int | float):
            rows.append((f"fwd+bwd overhead, {key.removesuffix('_overhead_pct')} kernels",
                         f"{value:.2f} %"))  # fmt: skip
        elif key in ("snapshot_ms", "nonzero_rows_to_runs_ms") and isinstance(value, int | float):
            rows.append((key.replace("_", " "), f"{value:.3f}"))
    return rows


def table(runs: list[CheckRun], installed: list[str]) -> str:
    """One summary table of every check of every script, then the figures."""
    rows: list[tuple[str, str, str]] = [("script", "check or figure", "result")]
    for run in runs:
        for name, ok in run.checks.items():
            rows.append((run.script, name, "PASS" if ok else "FAIL"))
        if not run.checks or run.status != "exit 0":
            rows.append((run.script, f"script ({run.seconds:.0f} s)", run.status.upper()))
        for what, value in overheads(run):
            rows.append((run.script, what, value))
    width = [max(len(r[i]) for r in rows) for i in range(3)]
    line = "+".join("-" * (w + 2) for w in width)
    cells = [
        "| " + " | ".join(cell.ljust(w) for cell, w in zip(r, width, strict=True)) + " |"
        for r in rows
    ]
    out = [f"+{line}+", cells[0], f"+{line}+", *cells[1:], f"+{line}+"]
    out.append(f"installed offline: {', '.join(installed) or 'nothing (all present)'}")
    return "\n".join(out)


def passed(runs: list[CheckRun]) -> bool:
    return all(r.status == "exit 0" and r.checks and all(r.checks.values()) for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheels", type=Path, default=ROOT / "gpu_wheels")
    parser.add_argument("--site", type=Path, default=ROOT / ".gpu-site")
    parser.add_argument("--timeout", type=float, default=130.0, help="seconds per check")
    parser.add_argument("--json", type=Path, help="also write the summary as JSON here")
    parser.add_argument("--witness-args", default="", help="extra arguments, space separated")
    parser.add_argument("--megatron-args", default="", help="extra arguments, space separated")
    args = parser.parse_args(argv)

    installed = install_missing(args.wheels, args.site)
    if build_hotpath():
        installed.append("ftaudit.eventlog.hotpath (built)")
    env = dict(os.environ)
    paths = [str(args.site), str(ROOT / "src"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    env["PYTHONUNBUFFERED"] = "1"
    runs = [
        run_check("gpu_witness_check.py", args.witness_args.split(), env, args.timeout),
        run_check("gpu_megatron_check.py", args.megatron_args.split(), env, args.timeout),
    ]
    print(table(runs, installed), flush=True)
    ok = passed(runs)
    if args.json:
        summary = {
            "passed": ok,
            "installed": installed,
            "runs": [r.__dict__ for r in runs],
        }
        args.json.write_text(json.dumps(summary, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
