"""The defects ``ftaudit synth --bug NAME`` can plant, and the rule that must catch each."""

from __future__ import annotations

from dataclasses import dataclass

from ftaudit.errors import by_name


@dataclass(frozen=True)
class SynthBug:
    name: str
    rule: str
    """The rule code that must report it (others may report consequences too)."""
    description: str
    needs_restart: bool = False


BUGS: tuple[SynthBug, ...] = (
    SynthBug(
        "missing_sample",
        "FT004",
        "one sample's gradient never reaches the last cell's weights",
    ),
    SynthBug(
        "leaked_attempt",
        "FT004",
        "a retried (discarded) attempt's gradient is applied to cell 0's weights anyway",
    ),
    SynthBug(
        "reissued_ids",
        "FT003",
        "a resumed incarnation restarts the allocator at the checkpoint's counter, "
        "re-issuing ids the abandoned incarnation used",
        needs_restart=True,
    ),
    SynthBug(
        "not_rolled_back",
        "FT006",
        "a resumed incarnation's cell 0 keeps its abandoned weights instead of loading the "
        "checkpoint (its witness rows too: FT004 sees them when the rolled-back stretch was "
        "short)",
        needs_restart=True,
    ),
    SynthBug("skipped_step", "FT002", "the driver loop jumps over one step"),
    SynthBug(
        "sample_twice",
        "FT005",
        "the data loader hands one step a sample the previous step already trained",
    ),
    SynthBug(
        "stream_jumps_back",
        "FT005",
        "the data loader's cursor jumps back half the run at the bug step (a shard cursor "
        "reset to a stale offset) and reads on from there: the samples of steps long "
        "committed are trained again",
    ),
    SynthBug(
        "checksum_mismatch",
        "FT006",
        "the last cell's rank 0 holds different weights from cell 0 after one step",
    ),
    SynthBug(
        "sequence_gap",
        "FT001",
        "one sealed segment of cell 0 rank 0 is lost (a hole in its sequence numbers)",
    ),
    SynthBug(
        "no_restore_evidence",
        "FT009",
        "a resumed incarnation's cell 0 trains without logging what it loaded",
        needs_restart=True,
    ),
    SynthBug(
        "allocation_lost",
        "FT009",
        "the driver hands one step's ids to the trainers without ever making the "
        "allocation durable",
    ),
    SynthBug(
        "checkpoint_late",
        "FT010",
        "every checkpoint from the bug step on holds the state of the step after its "
        "iteration (an asynchronous save staged one step late)",
    ),
    SynthBug(
        "gradient_not_cleared",
        "FT011",
        "cell 0's gradient still holds the previous step's ids (zero_grad skipped)",
    ),
    SynthBug(
        "stepped_twice",
        "FT011",
        "cell 0 applies its optimizer step twice in one committed step",
    ),
    SynthBug(
        "scheduler_not_restored",
        "FT006",
        "a resumed incarnation loads weights and optimizer but not the LR scheduler",
        needs_restart=True,
    ),
    SynthBug(
        "peer_shard_content",
        "FT008",
        "the last cell feeds cell 0's shard under its own (correct) sample indices",
    ),
    SynthBug(
        "wrong_items_after_resume",
        "FT008",
        "a resumed incarnation's loader restarts one batch behind its saved state: every "
        "sample index is fed the content of the item one step earlier",
        needs_restart=True,
    ),
    SynthBug(
        "epoch_restarted_after_resume",
        "FT008",
        "a resumed incarnation's loader reads its epoch again from the first item (the "
        "sampler's state was not restored) while the sample indices go on from the "
        "checkpoint: items trained before the crash are trained again",
        needs_restart=True,
    ),
    SynthBug(
        "stream_skips_after_resume",
        "FT005",
        "a resumed incarnation's loader restarts one batch ahead of its checkpoint's "
        "position: a batch of samples is never trained",
        needs_restart=True,
    ),
    SynthBug(
        "stream_replays_after_resume",
        "FT005",
        "a resumed incarnation's loader restarts one batch behind its checkpoint's "
        "position: the checkpoint step's batch is trained twice",
        needs_restart=True,
    ),
    SynthBug(
        "head_frozen",
        "FT012",
        "a resumed incarnation's cell 0 trains with its output head frozen",
        needs_restart=True,
    ),
)


BUGS_BY_NAME: dict[str, SynthBug] = {b.name: b for b in BUGS}


def get_bug(name: str) -> SynthBug:
    """The bug called ``name`` (snake_case, like the demo's; dashes are accepted too)."""
    return by_name(BUGS_BY_NAME, name, "synth bug")
