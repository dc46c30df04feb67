"""The offline GPU entry command (``benchmarks/run_gpu_checks.py``) on the CPU.

Its install step, its table and its verdict are tested here; the slow test runs the
real entry command end to end, both checks on a tiny CPU configuration (the Megatron
one through the tests' compatibility layer).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.processes import load_benchmark

pytestmark = pytest.mark.torch
ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "benchmarks" / "run_gpu_checks.py"


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return load_benchmark("run_gpu_checks.py")


def test_requirements_are_pinned_and_never_torch(runner: ModuleType) -> None:
    names = {r.name: r.version for r in runner.read_requirements()}
    assert names["megatron-core"] == "0.16.1"
    assert {"duckdb", "pydantic", "pydantic-core"} <= set(names)
    assert "torch" not in names and not any(n.startswith("nvidia") for n in names)


def _closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, transitively (extras left out)."""
    import importlib.metadata as md

    out: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo += [_dist(r) for r in requires if "extra ==" not in r]
    return out


def _dist(requirement: str) -> str:
    return re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


@pytest.mark.slow
def test_requirements_cover_what_the_checks_import(runner: ModuleType) -> None:
    # what the checks import of ftaudit's own dependencies (and megatron-core's), torch
    # and what torch brings aside, must be a wheel the GPU machine gets
    code = (
        "import sys, json, importlib.metadata as md\n"
        "import ftaudit.trainer_hooks.torch, megatron.core.optimizer\n"
        "tops = {m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)\n"
        "dists = md.packages_distributions()\n"
        "print(json.dumps(sorted({d for t in tops for d in dists.get(t, [])})))\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    imported = {_dist(d) for d in json.loads(out.stdout)}
    declared = _closure({"ftaudit", "megatron-core"}) - _closure({"torch"})
    wheels = {r.name for r in runner.read_requirements()}
    assert (imported & declared) - {"ftaudit"} <= wheels, (imported & declared) - wheels


def test_version_rules(runner: ModuleType) -> None:
    mcore = runner.Requirement("megatron-core", "0.16.1")
    assert mcore.satisfied_by("0.16.1") and not mcore.satisfied_by("0.16.2")
    core = runner.Requirement("pydantic-core", "2.50.5")
    assert not core.satisfied_by("2.41.5")  # pydantic pins its core exactly
    # ftaudit's own floors (pyproject.toml) decide for its direct dependencies
    floors = {r.name: r.floor for r in runner.read_requirements()}
    assert floors["pyarrow"] == "16" and floors["numpy"] == "1.26"
    pyarrow = runner.Requirement("pyarrow", "26.0.1", "16")
    assert pyarrow.satisfied_by("21.0.0") and not pyarrow.satisfied_by("15.0.2")
    extensions = runner.Requirement("typing-extensions", "4.16.0")  # no floor: the pin
    assert extensions.satisfied_by("4.17.1rc1") and not extensions.satisfied_by("4.12.2")
    assert not extensions.satisfied_by(None)


def test_nothing_is_installed_where_everything_is_present(
    runner: ModuleType, tmp_path: Path
) -> None:
    # this venv holds every pin: no wheel folder is needed, nothing is written
    assert runner.install_missing(tmp_path / "no_wheels", tmp_path / "site") == []
    assert not (tmp_path / "site").exists()


def test_missing_wheels_are_a_clear_error(runner: ModuleType, tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text("surely-not-installed-package==1.0\n")
    with pytest.raises(SystemExit, match=r"no wheel folder.*surely-not-installed-package"):
        runner.install_missing(tmp_path / "no_wheels", tmp_path / "site", req)


def test_a_missing_requirement_without_its_wheel_is_named(
    runner: ModuleType, tmp_path: Path
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "pydantic_core-2.50.5-cp312-cp312-manylinux2014_x86_64.whl").touch()
    (wheels / "Typing_Extensions-4.16.0-py3-none-any.whl").touch()
    core = runner.Requirement("pydantic-core", "2.50.5")
    assert runner.wheel_of(core, wheels).name.startswith("pydantic_core-2.50.5-")
    assert runner.wheel_of(runner.Requirement("typing-extensions", "4.16.0"), wheels)
    assert runner.wheel_of(runner.Requirement("pydantic-core", "2.50.6"), wheels) is None
    req = tmp_path / "req.txt"
    req.write_text("surely-not-installed-package==1.0\n")
    with pytest.raises(SystemExit, match=r"no wheel for surely-not-installed-package==1\.0"):
        runner.install_missing(wheels, tmp_path / "site", req)


def test_the_writers_c_module_is_built_where_a_checkout_has_none(
    runner: ModuleType, tmp_path: Path
) -> None:
    # a fresh checkout on the GPU machine has no build of hotpath.c (``*.so`` is ignored)
    # for its Python: the entry command builds it in place, once, and leaves nothing else
    package = tmp_path / "src" / "ftaudit" / "eventlog"
    package.mkdir(parents=True)
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (package / "hotpath.c").write_bytes((ROOT / "src/ftaudit/eventlog/hotpath.c").read_bytes())
    assert runner.build_hotpath(tmp_path)
    built = [p.name for p in package.iterdir() if p.name != "hotpath.c"]
    assert len(built) == 1 and built[0].startswith("hotpath.") and built[0].endswith(".so")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "pyproject.toml",
                                                          "setup.py", "src"]  # fmt: skip
    loads = (
        "import importlib.util as u, sys\n"
        "spec = u.spec_from_file_location('ftaudit.eventlog.hotpath', sys.argv[1])\n"
        "module = u.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert callable(module.add)\n"
    )
    subprocess.run([sys.executable, "-c", loads, str(package / built[0])], check=True)
    assert not runner.build_hotpath(tmp_path)


def test_table_and_verdict(runner: ModuleType) -> None:
    good = runner.CheckRun("a.py", {"x": True}, {"default_overhead_pct": 1.5}, "exit 0", 3.0)
    bad = runner.CheckRun("b.py", {"y": False}, {}, "exit 1", 4.0)
    late = runner.CheckRun("c.py", {}, {}, "timed out after 130 s", 130.0)
    text = runner.table([good, bad, late], ["duckdb==2.0.1"])
    assert re.search(r"\| a\.py +\| x +\| PASS", text)
    assert re.search(r"\| b\.py +\| y +\| FAIL", text)
    assert re.search(r"\| c\.py +\| script \(130 s\) +\| TIMED OUT AFTER 130 S", text)
    assert "fwd+bwd overhead, default kernels" in text and "1.50 %" in text
    assert "installed offline: duckdb==2.0.1" in text
    assert runner.passed([good]) and not runner.passed([good, bad])
    assert not runner.passed([late])


@pytest.mark.slow
def test_entry_command_runs_both_checks_on_the_cpu(tmp_path: Path) -> None:
    summary = tmp_path / "summary.json"
    witness = "--device cpu --dtype fp32 --layers 2 --hidden 32 --heads 2 --vocab 64 --seq 16"
    witness += " --batch 2 --buffer-size 4096 --iters 2 --warmup 1 --rounds 1"
    megatron = "--cpu-compat --layers 2 --hidden 64 --seq 32 --batch 2 --buffer 6000"
    megatron += " --repeats 2 --vocab 128"
    command = [sys.executable, "-W", "ignore", str(SCRIPT), "--json", str(summary)]
    command += ["--timeout", "500", "--witness-args", witness, "--megatron-args", megatron]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    result = json.loads(summary.read_text())
    assert result["passed"] and result["installed"] == []
    scripts = {run["script"]: run["checks"] for run in result["runs"]}
    assert scripts["gpu_witness_check.py"]["forward bitwise equal (nonzero rows)"]
    assert scripts["gpu_megatron_check.py"]["forward bitwise equal with witness ids (nonzero rows)"]
    assert "| script " in done.stdout and "installed offline: nothing" in done.stdout
