"""The one compiled module, the writer's hot path (``src/ftaudit/eventlog/hotpath.c``);
everything else is in ``pyproject.toml``."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "ftaudit.eventlog.hotpath",
            ["src/ftaudit/eventlog/hotpath.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"],
        )
    ]
)
