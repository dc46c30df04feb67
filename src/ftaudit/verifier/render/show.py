"""``ftaudit show``: a run's history in the terminal.

Incarnations with their resume points, then the steps (quiet stretches folded into one
row): which attempt was committed, what was retried or abandoned, each cell's outcome,
the cells alive, faults, heals and checkpoints; then each rule's result. Rendered with
rich to a string; with ``color=False`` there is not one escape code in it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from rich import box
from rich.table import Table
from rich.text import Text

from ftaudit.console import string_console
from ftaudit.verifier.findings import Report
from ftaudit.verifier.history import AttemptInfo, RunHistory
from ftaudit.verifier.render.describe import plural, rule_status, summarize

_STATUS_STYLE = {
    "committed": "green",
    "retried": "yellow",
    "rolled_back": "magenta",
    "unfinished": "red",
}
_CELL_STYLE = {"normal": "green", "discarded": "yellow", "errored": "bold red"}
_RULE_STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red"}


def _attempt_text(a: AttemptInfo) -> Text:
    label = a.status.replace("_", " ")
    return Text(f"i{a.incarnation} a{a.attempt} {label}", style=_STATUS_STYLE.get(a.status, ""))


def _cells_text(a: AttemptInfo | None) -> Text:
    out = Text()
    if a is None or not a.cells:
        return Text("-", style="dim")
    for n, c in enumerate(a.cells):
        if n:
            out.append(" ")
        out.append(f"{c.cell}:{c.state}", style=_CELL_STYLE.get(c.state, ""))
    return out


@dataclass
class _StepRow:
    first: int
    last: int
    committed: Text
    others: Text
    cells: Text
    alive: str
    events: Text

    def signature(self) -> tuple[str, str, str, str]:
        # a committed attempt's incarnation and attempt number, cells and alive cells:
        # consecutive steps that agree on these and have no events fold into one row
        return (self.committed.plain, self.others.plain, self.cells.plain, self.alive)


def _step_rows(pic: RunHistory) -> list[_StepRow]:
    by_step: dict[int, list[AttemptInfo]] = defaultdict(list)
    for a in pic.attempts:
        by_step[a.step].append(a)
    events: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for f in pic.faults:
        if f.step is not None:
            where = f" (attempt {f.attempt})" if f.attempt else ""
            events[f.step].append((f"fault: {f.mode} {f.target}{where}", "bold red"))
    for r in pic.reconfigs:
        if r.healed_cells and r.step is not None:
            src = f" from cell {r.heal_source}" if r.heal_source is not None else ""
            healed = ", ".join(map(str, r.healed_cells))
            events[r.step].append((f"heal: cell {healed}{src}", "cyan"))
    for c in pic.checkpoints:
        restored = (
            f", restored by incarnation {', '.join(map(str, c.resumed_by))}" if c.resumed_by else ""
        )
        events[c.iteration].append(
            (f"checkpoint (i{c.incarnation}{restored})", "blue" if restored else "")
        )
    for inc in pic.incarnations:
        if inc.resumed_iteration is not None and inc.first_step is not None:
            events[inc.first_step].append(
                (f"restart: incarnation {inc.number} resumes here", "bold magenta")
            )
    alive_at = _alive_by_step(pic)
    rows: list[_StepRow] = []
    for step in pic.steps:
        attempts = by_step[step]
        committed = [a for a in attempts if a.status == "committed"]
        others = [a for a in attempts if a.status != "committed"]
        c_text = Text(" ".join(f"i{a.incarnation} a{a.attempt}" for a in committed) or "none")
        if not committed:
            c_text.stylize("bold red")
        o_text = Text()
        for n, a in enumerate(others):
            if n:
                o_text.append(", ")
            o_text.append_text(_attempt_text(a))
        ev = Text()
        for n, (text, style) in enumerate(events.get(step, [])):
            if n:
                ev.append("; ")
            ev.append(text, style=style)
        rows.append(
            _StepRow(
                step,
                step,
                c_text,
                o_text,
                _cells_text(committed[0] if committed else None),
                alive_at.get(step, ""),
                ev,
            )
        )
    folded: list[_StepRow] = []
    for row in rows:
        prev = folded[-1] if folded else None
        if (
            prev is not None
            and not prev.events.plain
            and not row.events.plain
            and not row.others.plain
            and prev.signature() == row.signature()
            and prev.last + 1 == row.first
        ):
            prev.last = row.last
        else:
            folded.append(row)
    return folded


def _alive_by_step(pic: RunHistory) -> dict[int, str]:
    """The cells alive after each committed step: the latest reconfiguration the committing
    incarnation logged at or before the step (a cell lost in the step has left the quorum;
    a heal at the start of the next step is logged with that step)."""
    out: dict[int, str] = {}
    committed = {a.step: a.incarnation for a in pic.attempts if a.status == "committed"}
    for step, inc in committed.items():
        alive = None
        for r in pic.reconfigs:
            if r.incarnation == inc and r.step is not None and r.step <= step:
                alive = r.alive_cells
        if alive is not None:
            out[step] = ",".join(map(str, alive))
    return out


def _incarnations_table(pic: RunHistory) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title_justify="left")
    for header in ("incarnation", "start", "steps", "attempts", "retries", "committed", "end"):
        table.add_column(header, no_wrap=header != "start")
    for inc in pic.incarnations:
        attempts = pic.attempts_of(inc.number)
        steps = "-" if inc.first_step is None else f"{inc.first_step}..{inc.last_step}"
        committed = sum(a.status == "committed" for a in attempts)
        end_style = "green" if inc.status == "completed" else "bold red"
        table.add_row(
            str(inc.number),
            inc.resume_text,
            steps,
            str(len(attempts)),
            str(sum(a.status == "retried" for a in attempts)),
            str(committed),
            Text(inc.status, style=end_style),
        )
    return table


def _steps_table(pic: RunHistory) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("step", justify="right", no_wrap=True)
    table.add_column("committed", no_wrap=True)
    table.add_column("cells (committed attempt)")
    table.add_column("alive after", no_wrap=True)
    table.add_column("other attempts")
    table.add_column("events")
    for row in _step_rows(pic):
        step = str(row.first) if row.first == row.last else f"{row.first}..{row.last}"
        table.add_row(step, row.committed, row.cells, row.alive, row.others, row.events)
    return table


def _rules_table(report: Report) -> Table:
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header in ("rule", "name", "result", "checked", "errors", "warnings"):
        table.add_column(header, justify="right" if header in ("checked", "errors") else "left")
    for r in report.results:
        status = rule_status(r, strict=False)
        table.add_row(
            r.code,
            r.name,
            Text(status, style=_RULE_STYLE[status]),
            str(r.checked),
            Text(str(r.errors), style="red" if r.errors else ""),
            Text(str(r.warnings), style="yellow" if r.warnings else ""),
        )
    return table


def render_show(pic: RunHistory, report: Report, *, color: bool = False, width: int = 100) -> str:
    """The terminal summary of one run."""
    console, out = string_console(color=color, width=width)
    committed = pic.committed_steps
    head = Text(f"ftaudit show {pic.run_dir}", style="bold")
    console.print(head, soft_wrap=True)
    facts = [
        plural(len(pic.incarnations), "incarnation"),
        plural(len(committed), "committed step"),
        plural(len(pic.attempts), "attempt"),
        plural(pic.retries(), "retry").replace("retrys", "retries"),
        plural(len(pic.faults), "fault"),
        plural(sum(len(r.healed_cells) for r in pic.reconfigs), "heal"),
        plural(len(pic.checkpoints), "checkpoint"),
        plural(len(pic.cells), "cell"),
    ]
    if pic.buffer_size:
        facts.append(f"B={pic.buffer_size}")
    console.print(Text(", ".join(facts)), soft_wrap=True)

    console.print()
    console.print(Text("Incarnations", style="bold"))
    console.print(_incarnations_table(pic))
    if pic.attempts:
        console.print()
        console.print(Text("Steps", style="bold"))
        console.print(_steps_table(pic))
    if pic.faults:
        console.print()
        console.print(Text("Faults", style="bold"))
        for f in pic.faults:
            where = "before any step" if f.step is None else f"step {f.step} attempt {f.attempt}"
            console.print(
                Text(f"  incarnation {f.incarnation}, {where}: {f.mode} {f.target}"),
                soft_wrap=True,
            )
    if pic.checkpoints:
        console.print()
        console.print(Text("Checkpoints", style="bold"))
        for c in pic.checkpoints:
            line = f"  iteration {c.iteration} saved by incarnation {c.incarnation}"
            if c.resumed_by:
                line += f"; restored by incarnation {', '.join(map(str, c.resumed_by))}"
            console.print(Text(line), soft_wrap=True)
    if pic.coverage:
        bad = [c for c in pic.coverage if not c.ok]
        console.print()
        console.print(Text("Witness coverage", style="bold"))
        seen = sum(c.seen for c in pic.coverage)
        expected = sum(c.expected for c in pic.coverage)
        line = Text(
            f"  {len(pic.coverage) - len(bad)} of {plural(len(pic.coverage), 'committed step')} "
            f"exact ({seen} of {expected} expected slots seen across the snapshots)"
        )
        console.print(line, soft_wrap=True)
        for c in bad[:10]:
            console.print(
                Text(
                    f"  step {c.step}: {c.missing} missing, {c.extra} extra of {c.expected} "
                    "expected",
                    style="red",
                ),
                soft_wrap=True,
            )
    console.print()
    console.print(Text("Rules", style="bold"))
    if report.results:
        console.print(_rules_table(report))
    summary = summarize(report, strict=False)
    console.print(
        Text(summary.headline(), style="bold green" if summary.passed else "bold red"),
        soft_wrap=True,
    )
    return out.getvalue()
