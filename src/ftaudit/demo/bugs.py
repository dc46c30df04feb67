"""The bug matrix: real defects in the demo's training or recovery code, one flag each.

Each defect changes what the cells or the driver DO (never the log afterwards); the
verifier must then catch it through the rule named here. ``ftaudit demo --bug NAME``
turns one on; ``--list-bugs`` prints the names.
"""

from __future__ import annotations

from dataclasses import dataclass

from ftaudit.errors import by_name


@dataclass(frozen=True)
class Bug:
    name: str
    defect: str
    """What the code gets wrong, in words."""
    rule: str
    """The verifier rule expected to report it."""
    symptom: str
    """A word the rule's message contains (how a person recognises it)."""


BUGS: tuple[Bug, ...] = (
    Bug(
        "skip_sample_after_resume",
        "the resumed data iterator starts one sample group late (off by one prompt)",
        "FT005",
        "never trained",
    ),
    Bug(
        "replay_batch_after_resume",
        "the resumed data iterator restarts at the checkpoint step's batch, replaying it",
        "FT005",
        "twice",
    ),
    Bug(
        "data_rewound_on_heal",
        "the driver handles a replaced cell like a restart and rewinds the data stream to "
        "the last checkpoint's; torchft's heal rolls no weights back, so the samples read "
        "since that checkpoint are trained again",
        "FT005",
        "trained in more than one committed step",
    ),
    Bug(
        "restore_older_checkpoint",
        "cells load the checkpoint before the one the log says the incarnation resumed from",
        "FT006",
        "differs from what was saved",
    ),
    Bug(
        "allocator_from_checkpoint_counter",
        "the resumed allocator continues from the counter saved in the checkpoint, not from "
        "the highest counter ever logged, re-issuing the abandoned incarnation's ids",
        "FT003",
        "re-issues",
    ),
    Bug(
        "stale_rows_not_cleared",
        "cells snapshot the witness after each step but never zero the stale rows",
        "FT004",
        "zeroed as stale",
    ),
    Bug(
        "adam_moments_not_cleared",
        "stale rows are zeroed in the parameter, but Adam's moments come back from an "
        "offloaded copy taken before the clear",
        "FT010",
        "exp_avg",  # the checkpoint's witness moments are not the state after the step
    ),
    Bug(
        "commit_despite_peer_discard",
        "a cell steps its optimizer when the gradient exchange succeeded, ignoring a peer's "
        "discard vote; the driver retries, so the abandoned attempt leaks into its weights",
        "FT004",
        "leaked into the weights",
    ),
    Bug(
        "wrong_shard",
        "cells pick their shard of the global batch by their rank within the cell instead "
        "of their rank among the cells, so every cell trains cell 0's shard",
        "FT004",
        "never reached the weights",
    ),
    Bug(
        "segment_lost",
        "a cell's checkpoint cleanup deletes the log segment it had just sealed",
        "FT001",
        "hole in writer",
    ),
    Bug(
        "healed_cell_differs",
        "a healed cell receives its peer's weights but keeps a fresh optimizer state",
        "FT006",
        "does not hold what the source held",
    ),
    Bug(
        "healed_cell_reads_peer_shard",
        "a healed cell takes the data cursor (its shard) from the peer it was healed from, so "
        "it reads the peer's items under its own sample indices and witness ids",
        "FT008",
        "sample index names",
    ),
    Bug(
        "shuffle_state_not_restored",
        "the resumed loader restores its position but rebuilds its shuffle generator unseeded, "
        "so the epoch continues in another order: right indices, other items",
        "FT008",
        "declared another order for epoch",
    ),
    Bug(
        "wrong_items_after_resume",
        "the checkpoint stores the prefetching reader's position, one batch ahead, so the "
        "resumed loader feeds the items of the step after each sample index",
        "FT008",
        "sample index names",
    ),
    Bug(
        "duplicated_item_across_shards",
        "a cell's shard end is taken inclusively, so it also trains the first prompt group "
        "of the next cell's shard: those items are trained by two cells",
        "FT008",
        "times in epoch 0 by cells",
    ),
    Bug(
        "restore_skipped_on_peer",
        "at a resume every cell restores torchft's step from the checkpoint, but only the "
        "cell that wrote the file loads the model and optimizer; torchft sees every replica "
        "up to date and heals none, so the others keep the state their process started with",
        "FT009",
        "no restore evidence",
    ),
    Bug(
        "allocation_not_durable",
        "the driver hands the witness ids to the cells first and logs the allocation with "
        "the attempt's end (one write per attempt); the job kill in between loses it",
        "FT009",
        "no allocation in the log",
    ),
    Bug(
        "checkpoint_one_step_late",
        "an asynchronous checkpoint of step c is written after step c + 1, with that "
        "step's state, under iteration c",
        "FT010",
        "is not the state after step",
    ),
    Bug(
        "zero_grad_skipped",
        "cells clear their gradients only every other step, so the previous step's "
        "gradient is applied a second time",
        "FT011",
        "never cleared",
    ),
    Bug(
        "optimizer_stepped_twice",
        "cells call optimizer.step() twice per committed step",
        "FT011",
        "applied twice",
    ),
    Bug(
        "heal_without_scheduler",
        "a healed cell receives its peer's weights and optimizer but not its learning-rate "
        "scheduler, so its warmup starts over",
        "FT006",
        "stateful/lr_scheduler",
    ),
    Bug(
        "head_frozen_after_resume",
        "a resumed cell freezes the output head (a fine-tuning flag applied on resume): "
        "every sample still reaches the witness, but the head no longer learns",
        "FT012",
        "head.weight frozen",
    ),
)

BUGS_BY_NAME: dict[str, Bug] = {b.name: b for b in BUGS}


def get_bug(name: str | None) -> Bug | None:
    """The bug called ``name`` (None for a correct run); an unknown name lists the known ones."""
    return None if name is None else by_name(BUGS_BY_NAME, name, "bug")


def active(bug: str | None, name: str) -> bool:
    """Whether defect ``name`` is switched on (``name`` must be a known bug)."""
    if name not in BUGS_BY_NAME:
        raise KeyError(f"no bug named {name!r}")  # a typo here would silently disable a defect
    return bug == name
