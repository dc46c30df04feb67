"""The report's timeline: steps across; per incarnation a lane of attempts and a lane per
cell; retries, rollbacks, crashes, faults, heals, checkpoints and restores marked. It
remembers which anchors exist, so a finding links to the element where it happens.
A long run draws buckets of steps, one box per incarnation and bucket (``buckets``)."""

from __future__ import annotations

import math
from collections import defaultdict

from ftaudit.verifier.findings import Location
from ftaudit.verifier.history import AttemptInfo, RunHistory
from ftaudit.verifier.render.html.buckets import AttemptBucket, attempt_buckets, bucket_size
from ftaudit.verifier.render.html.svg import esc, num, step_width, tick_every, title

LABEL_W = 150
"""Width of the lane labels on the left of the timeline."""
TOP = 30
ATT_H = 22
CELL_H = 14
GAP = 10


class Timeline:
    """Lays out the timeline and remembers which anchors exist (for linking findings)."""

    def __init__(self, pic: RunHistory) -> None:
        self.pic = pic
        self.n_steps = (max(pic.steps) + 1) if pic.steps else 1
        self.k = bucket_size(self.n_steps)
        """Steps per column (1 up to ``buckets.MAX_COLUMNS`` steps)."""
        self.n_cols = math.ceil(self.n_steps / self.k)
        self.cw = step_width(self.n_cols)
        self.anchors: set[str] = set()
        self.lane_y: dict[tuple[int, int | None], float] = {}
        """(incarnation, cell or None for the attempts lane) -> top y."""
        y = TOP
        for inc in pic.incarnations:
            self.lane_y[(inc.number, None)] = y
            y += ATT_H + 4
            for cell in pic.cells:
                self.lane_y[(inc.number, cell)] = y
                y += CELL_H + 2
            y += GAP
        self.height = y + 6
        self.width = LABEL_W + self.n_cols * self.cw + 20

    def x(self, step: int) -> float:
        return LABEL_W + (step // self.k) * self.cw

    def column_anchor(self, step: int) -> str:
        """The anchor of the column holding ``step``."""
        return f"t-s{step}" if self.k == 1 else f"t-b{step // self.k}"

    def target(self, loc: Location) -> str | None:
        """The most precise timeline anchor for a violation's location."""
        step, attempt, inc = loc.step, loc.attempt, loc.incarnation
        if step is not None and inc is None:
            pic = self.pic
            committed = [a for a in pic.attempts if a.step == step and a.status == "committed"]
            if committed and (attempt is None or committed[0].attempt == attempt):
                inc, attempt = committed[0].incarnation, committed[0].attempt
        if step is not None and inc is not None and attempt is not None:
            base = (
                f"t-i{inc}-s{step}-a{attempt}"
                if self.k == 1
                else AttemptBucket.anchor_of(inc, step // self.k)
            )
            return f"{base}-c{loc.cell}" if loc.cell is not None else base
        if step is not None:
            return self.column_anchor(step)
        if inc is not None:
            return f"t-i{inc}"
        return None

    def attempt_box(self, a: AttemptInfo, of: list[AttemptInfo]) -> tuple[float, float]:
        """x and width of an attempt inside its step's column (attempts side by side)."""
        n = len(of)
        i = of.index(a)
        inner = self.cw - 2
        w = inner / n
        return self.x(a.step) + 1 + i * w, max(w - 1, 1.5)

    def svg(self, bad: dict[str, list[str]]) -> str:
        pic, cw = self.pic, self.cw
        out: list[str] = [
            f'<svg xmlns="http://www.w3.org/2000/svg" id="timeline-svg" '
            f'width="{num(self.width)}" height="{num(self.height)}" '
            f'viewBox="0 0 {num(self.width)} {num(self.height)}" role="img" '
            f'aria-label="timeline of the run">'
        ]
        # step columns: targets for findings that only name a step
        for col in range(self.n_cols):
            step = col * self.k
            anchor = self.column_anchor(step)
            self.anchors.add(anchor)
            out.append(
                f'<rect class="step-col" id="{anchor}" x="{num(self.x(step))}" y="{TOP - 4}" '
                f'width="{num(cw)}" height="{num(self.height - TOP)}"/>'
            )
        # axis
        every = tick_every(self.n_cols, cw) * self.k
        out.append('<g class="axis">')
        out.append(f'<text x="4" y="{TOP - 12}">step</text>')
        for step in range(0, self.n_steps, every):
            x = self.x(step) + cw / 2
            out.append(f'<text x="{num(x)}" y="{TOP - 12}" text-anchor="middle">{step}</text>')
            out.append(
                f'<line x1="{num(x)}" x2="{num(x)}" y1="{TOP - 8}" y2="{TOP - 4}" stroke="#bbb"/>'
            )
        out.append("</g>")
        by_inc_step: dict[tuple[int, int], list[AttemptInfo]] = defaultdict(list)
        for a in pic.attempts:
            by_inc_step[(a.incarnation, a.step)].append(a)
        for inc in pic.incarnations:
            y = self.lane_y[(inc.number, None)]
            lane = f"t-i{inc.number}"
            self.anchors.add(lane)
            out.append(f'<g id="{lane}">')
            label = f"incarnation {inc.number}"
            out.append(
                f'<text class="lane-label" x="4" y="{num(y + 15)}">{esc(label)}'
                f"{title(inc.resume_text + '; ' + inc.status)}</text>"
            )
            for cell in pic.cells:
                cy = self.lane_y[(inc.number, cell)]
                out.append(f'<text x="16" y="{num(cy + 11)}">cell {cell}</text>')
            out.append("</g>")
            if self.k > 1:
                continue
            for (i, _step), attempts in sorted(by_inc_step.items()):
                if i != inc.number:
                    continue
                for a in attempts:
                    out.extend(self._attempt(a, attempts, bad))
        if self.k > 1:
            for b in attempt_buckets(pic.attempts, self.k):
                out.extend(self._bucket(b, bad))
        out.extend(self._markers(bad))
        out.append("</svg>")
        return "\n".join(out)

    def _attempt(
        self, a: AttemptInfo, attempts: list[AttemptInfo], bad: dict[str, list[str]]
    ) -> list[str]:
        x, w = self.attempt_box(a, attempts)
        y = self.lane_y[(a.incarnation, None)]
        anchor = a.anchor
        self.anchors.add(anchor)
        cells_txt = ", ".join(f"cell {c.cell} {c.state}" for c in a.cells) or "no decision logged"
        tip = (
            f"step {a.step} attempt {a.attempt} (incarnation {a.incarnation}): "
            f"{a.status.replace('_', ' ')}; {cells_txt}"
        )
        finding = finding_attr(bad.get(anchor))
        out = [
            f'<rect class="att {a.status}" id="{anchor}" x="{num(x)}" y="{num(y)}" '
            f'width="{num(w)}" height="{ATT_H}" rx="2"{finding}>{title(tip)}</rect>'
        ]
        if anchor in bad:
            out.append(bad_mark(x, y, w, ATT_H))
        faint = " faint" if a.status != "committed" else ""
        for c in a.cells:
            if (a.incarnation, c.cell) not in self.lane_y:
                continue
            cy = self.lane_y[(a.incarnation, c.cell)]
            canchor = f"{anchor}-c{c.cell}"
            self.anchors.add(canchor)
            ctip = f"cell {c.cell}: {c.state} in step {a.step} attempt {a.attempt}"
            cfinding = finding_attr(bad.get(canchor))
            out.append(
                f'<rect class="cell {c.state}{faint}" id="{canchor}" x="{num(x)}" '
                f'y="{num(cy)}" width="{num(w)}" height="{CELL_H}"{cfinding}>'
                f"{title(ctip)}</rect>"
            )
            if c.state == "errored":
                m = min(w, CELL_H) / 2 - 1
                cx, cyy = x + w / 2, cy + CELL_H / 2
                out.append(
                    f'<path class="crash" d="M{num(cx - m)} {num(cyy - m)} '
                    f"L{num(cx + m)} {num(cyy + m)} M{num(cx + m)} {num(cyy - m)} "
                    f'L{num(cx - m)} {num(cyy + m)}">{title(ctip + " (crashed)")}</path>'
                )
            if canchor in bad:
                out.append(bad_mark(x, cy, w, CELL_H))
        return out

    def _bucket(self, b: AttemptBucket, bad: dict[str, list[str]]) -> list[str]:
        """One box for an incarnation's attempts in a bucket, one per cell below it."""
        if (b.incarnation, None) not in self.lane_y:
            return []
        x, w = self.x(b.first_step) + 1, max(self.cw - 2, 1.5)
        y = self.lane_y[(b.incarnation, None)]
        self.anchors.add(b.anchor)
        out = [
            f'<rect class="att {b.status}" id="{b.anchor}" x="{num(x)}" y="{num(y)}" '
            f'width="{num(w)}" height="{ATT_H}" rx="2"{finding_attr(bad.get(b.anchor))}>'
            f"{title(b.tooltip())}</rect>"
        ]
        if b.anchor in bad:
            out.append(bad_mark(x, y, w, ATT_H))
        faint = " faint" if b.status != "committed" else ""
        for c in b.cells:
            if (b.incarnation, c.cell) not in self.lane_y:
                continue
            cy = self.lane_y[(b.incarnation, c.cell)]
            canchor = f"{b.anchor}-c{c.cell}"
            self.anchors.add(canchor)
            tip = f"cell {c.cell}: worst {c.state} in steps {b.first_step}-{b.last_step}"
            out.append(
                f'<rect class="cell {c.state}{faint}" id="{canchor}" x="{num(x)}" '
                f'y="{num(cy)}" width="{num(w)}" height="{CELL_H}"'
                f"{finding_attr(bad.get(canchor))}>{title(tip)}</rect>"
            )
            if canchor in bad:
                out.append(bad_mark(x, cy, w, CELL_H))
        return out

    def _markers(self, bad: dict[str, list[str]]) -> list[str]:
        pic, cw = self.pic, self.cw
        out: list[str] = []
        # faults: a red triangle at the top of the lane it hit
        for n, f in enumerate(pic.faults):
            if f.step is None or (f.incarnation, None) not in self.lane_y:
                continue
            lane = (f.incarnation, f.cell) if (f.incarnation, f.cell) in self.lane_y else None
            y = self.lane_y[lane] if lane else self.lane_y[(f.incarnation, None)]
            x = self.x(f.step) + 2
            anchor = f"fault-{n}"
            self.anchors.add(anchor)
            tip = f"fault injected: {f.mode} {f.target}, step {f.step} attempt {f.attempt}"
            out.append(
                f'<path class="fault" id="{anchor}" d="M{num(x)} {num(y - 3)} '
                f'l8 0 l-4 8 z">{title(tip)}</path>'
            )
        # heals: a "+" disc in the healed cell's lane
        for r in pic.reconfigs:
            if r.step is None:
                continue
            for cell in r.healed_cells:
                if (r.incarnation, cell) not in self.lane_y:
                    continue
                y = self.lane_y[(r.incarnation, cell)] + CELL_H / 2
                x = self.x(r.step) + 1
                src = f" from cell {r.heal_source}" if r.heal_source is not None else ""
                tip = f"cell {cell} healed{src} before step {r.step}"
                out.append(
                    f'<g class="heal-mark"><circle class="heal" cx="{num(x)}" cy="{num(y)}" '
                    f'r="5">{title(tip)}</circle><path d="M{num(x - 3)} {num(y)} h6 '
                    f'M{num(x)} {num(y - 3)} v6" stroke="#fff" stroke-width="1.6"/></g>'
                )
        # checkpoints (diamond at the end of the iteration's column) and restores (arrows)
        spot: dict[tuple[int, int], tuple[float, float]] = {}
        for c in pic.checkpoints:
            if (c.incarnation, None) not in self.lane_y:
                continue
            x = self.x(c.iteration) + cw - 1
            y = self.lane_y[(c.incarnation, None)] - 1
            spot[(c.iteration, c.incarnation)] = (x, y)
            anchor = f"ck-i{c.incarnation}-{c.iteration}"
            self.anchors.add(anchor)
            restored = (
                f"; restored by incarnation {', '.join(map(str, c.resumed_by))}"
                if c.resumed_by
                else ""
            )
            tip = f"checkpoint {c.iteration} saved by incarnation {c.incarnation}{restored}"
            out.append(
                f'<path class="ckpt" id="{anchor}" d="M{num(x)} {num(y - 5)} l5 5 l-5 5 '
                f'l-5 -5 z">{title(tip)}</path>'
            )
        for inc in pic.incarnations:
            if inc.resumed_iteration is None or inc.resumed_incarnation is None:
                continue
            src = spot.get((inc.resumed_iteration, inc.resumed_incarnation))
            if src is None or (inc.number, None) not in self.lane_y:
                continue
            x1, y1 = src
            x2 = self.x(inc.resumed_iteration + 1) + 1
            y2 = self.lane_y[(inc.number, None)] + ATT_H / 2
            tip = (
                f"incarnation {inc.number} restored checkpoint {inc.resumed_iteration} "
                f"(saved by incarnation {inc.resumed_incarnation})"
            )
            mid = (y1 + y2) / 2
            out.append(
                f'<path class="restore" id="restore-i{inc.number}" '
                f'd="M{num(x1)} {num(y1 + 5)} C{num(x1)} {num(mid)} {num(x2 - 8)} '
                f'{num(mid)} {num(x2 - 6)} {num(y2)}">{title(tip)}</path>'
                f'<path class="ckpt" d="M{num(x2 - 6)} {num(y2 - 4)} l5 4 l-5 4 z"/>'
            )
            self.anchors.add(f"restore-i{inc.number}")
        return out


def finding_attr(findings: list[str] | None) -> str:
    return f' data-finding="{esc(findings[0])}"' if findings else ""


def bad_mark(x: float, y: float, w: float, h: float) -> str:
    return (
        f'<rect class="bad-mark" x="{num(x - 1.5)}" y="{num(y - 1.5)}" '
        f'width="{num(w + 3)}" height="{num(h + 3)}" rx="3"/>'
    )
