"""What every part of the HTML report draws with: escaping, numbers, tooltips, legends."""

from __future__ import annotations

import html


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def num(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def title(text: str) -> str:
    return f"<title>{esc(text)}</title>"


def step_width(n_steps: int) -> float:
    return max(12.0, min(72.0, 1100.0 / max(n_steps, 1)))


def tick_every(n_steps: int, cw: float) -> int:
    every = 1
    for candidate in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000):
        every = candidate
        if candidate * cw >= 28:
            break
    return every


def legend(items: list[tuple[str, str]]) -> str:
    spans = "".join(f'<span style="--c:{c}">{esc(t)}</span>' for t, c in items)
    return f'<div class="legend">{spans}</div>'
