"""The one compiled module, the writer's hot path (``src/ftaudit/eventlog/hotpath.c``);
everything else is in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ftaudit.eventlog.hotpath",
            ["src/ftaudit/eventlog/hotpath.c"],
            # warnings shown, not fatal: a newer Python's headers may deprecate a call
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
