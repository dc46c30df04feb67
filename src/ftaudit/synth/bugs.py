"""The defects ``ftaudit synth --bug NAME`` can plant, and the rule that must catch each."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SynthBug:
    name: str
    rule: str
    """The rule code that must report it (others may report consequences too)."""
    description: str
    needs_restart: bool = False


BUGS: tuple[SynthBug, ...] = (
    SynthBug(
        "missing-sample",
        "FT004",
        "one sample's gradient never reaches the last cell's weights",
    ),
    SynthBug(
        "leaked-attempt",
        "FT004",
        "a retried (discarded) attempt's gradient is applied to cell 0's weights anyway",
    ),
    SynthBug(
        "reissued-ids",
        "FT003",
        "a resumed incarnation restarts the allocator at the checkpoint's counter, "
        "re-issuing ids the abandoned incarnation used",
        needs_restart=True,
    ),
    SynthBug(
        "not-rolled-back",
        "FT006",
        "a resumed incarnation's cell 0 keeps its abandoned weights instead of loading the "
        "checkpoint (its witness rows too: FT004 sees them when the rolled-back stretch was "
        "short)",
        needs_restart=True,
    ),
    SynthBug("skipped-step", "FT002", "the driver loop jumps over one step"),
    SynthBug(
        "sample-twice",
        "FT005",
        "the data loader hands one step a sample the previous step already trained",
    ),
    SynthBug(
        "checksum-mismatch",
        "FT006",
        "the last cell's rank 0 holds different weights from cell 0 after one step",
    ),
    SynthBug(
        "sequence-gap",
        "FT001",
        "one sealed segment of cell 0 rank 0 is lost (a hole in its sequence numbers)",
    ),
    SynthBug(
        "no-restore-evidence",
        "FT009",
        "a resumed incarnation's cell 0 trains without logging what it loaded",
        needs_restart=True,
    ),
    SynthBug(
        "allocation-lost",
        "FT009",
        "the driver hands one step's ids to the trainers without ever making the "
        "allocation durable",
    ),
    SynthBug(
        "checkpoint-late",
        "FT010",
        "every checkpoint from the bug step on holds the state of the step after its "
        "iteration (an asynchronous save staged one step late)",
    ),
    SynthBug(
        "gradient-not-cleared",
        "FT011",
        "cell 0's gradient still holds the previous step's ids (zero_grad skipped)",
    ),
    SynthBug(
        "stepped-twice",
        "FT011",
        "cell 0 applies its optimizer step twice in one committed step",
    ),
    SynthBug(
        "scheduler-not-restored",
        "FT006",
        "a resumed incarnation loads weights and optimizer but not the LR scheduler",
        needs_restart=True,
    ),
    SynthBug(
        "head-frozen",
        "FT012",
        "a resumed incarnation's cell 0 trains with its output head frozen",
        needs_restart=True,
    ),
)


def get_bug(name: str) -> SynthBug:
    for bug in BUGS:
        if bug.name == name:
            return bug
    known = ", ".join(b.name for b in BUGS)
    raise ValueError(f"unknown synth bug {name!r}; known: {known}")
