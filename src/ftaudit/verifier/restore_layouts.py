"""Restores over another parallel layout: which cells loaded a checkpoint on other ranks
than saved it, and what their loaded state is compared with.

A resumed job may run another layout than the one that saved its checkpoint: another
world size (DCP reshards), FSDP saved and DDP resumed (or back), another pipeline split.
Rank ``r`` then holds other tensors, or other rows of them, than rank ``r`` saved, so a
restore cannot be compared rank by rank; the cell is compared as a whole, over the names
whose hashes do not depend on the layout (``@whole`` digests, plain hashes; never a
local shard's). FT006 reports what
differs; FT010 leaves such a load's rank alone when no rank of the same index saved.

A rank that saved no copy of a name (a new rank when the world grew) can only restore it
from another rank's copy, which is right only where every saved rank held the same: an
untagged name whose saved copies differ is state of one rank (an RNG, a loader
position), and no saved copy is the new rank's (:meth:`LayoutChange.foreign_copies`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ftaudit.eventlog.vocabulary import SHARD_TAG, tensor_of
from ftaudit.verifier.context import RunContext

LAYOUTS = """
    SELECT c.incarnation, c.step, c."when", coalesce(c.source_role, '') AS role, c.cell,
           c.rank, map_keys(c.hashes) AS tensors, map_values(c.hashes) AS hashes,
           coalesce(c.checkpoint.iteration,
                    CASE WHEN c."when" = 'at_save' THEN c.step ELSE i.resumed_iteration END)
               AS ckpt_iteration,
           coalesce(c.checkpoint.incarnation,
                    CASE WHEN c."when" = 'at_save' THEN c.incarnation
                         ELSE i.resumed_incarnation END) AS ckpt_incarnation
    FROM trainer_weight_checksum c LEFT JOIN incarnations i USING (incarnation)
    WHERE c."when" IN ('at_save', 'after_load')
    ORDER BY c.incarnation, c.writer, c.seq"""
"""Every save and load checksum with its tensors, for telling a changed layout apart."""

State = dict[str, str]
"""Tensor name -> hash, as one checksum logged it."""


def is_shard(name: str) -> bool:
    """A hash of a local shard (``w@rows[0:20]``): it depends on the layout."""
    return SHARD_TAG + "[" in name


@dataclass(frozen=True)
class ForeignCopy:
    """A rank that loaded per-rank state it never saved: the saved ranks' copies differ."""

    rank: int
    names: tuple[str, ...]
    """The names whose saved copies differ and of which this rank saved none."""
    saved_by: tuple[int, ...]
    """The ranks that saved copies of them."""
    taken_from: tuple[int | None, ...]
    """Per name, the saved rank whose copy this rank holds (None: no saved copy)."""


@dataclass(frozen=True)
class LayoutChange:
    """A cell that loaded checkpoint ``iteration`` over other ranks than saved it."""

    incarnation: int
    cell: int
    role: str
    step: int | None
    iteration: int
    saved_by: int
    loaded: dict[int, State]
    """Rank -> what it loaded."""
    saved: dict[int, State]
    """Rank -> what it saved (the cell's own save, else the lowest cell's)."""

    @property
    def ranks_loaded(self) -> int:
        return len(self.loaded)

    @property
    def ranks_saved(self) -> int:
        return len(self.saved)

    def diff(self) -> tuple[list[str], list[str], list[str], list[str]]:
        """Names whose hashes differ; tensors only loaded; tensors only saved; tensors on
        both sides without a name both log, so nothing of them could be compared.

        Where the same rank index holds a name on both sides (a layout-independent digest,
        a per-rank value such as an RNG state) the two are compared; a name the rank did
        not save is compared with the one copy every saved rank held (copies that differ
        are :meth:`foreign_copies`, not listed here). Local shards never
        compare (their rows depend on the layout): a tensor is covered by its
        whole-tensor digest (``@whole``) or its plain hash.
        """
        anywhere = self._copies()
        differ: set[str] = set()
        loaded_names: set[str] = set()
        for rank, state in self.loaded.items():
            own = self.saved.get(rank, {})
            for name, value in state.items():
                loaded_names.add(name)
                if is_shard(name) or name not in anywhere:
                    continue
                if name in own:
                    if own[name] != value:
                        differ.add(name)
                elif len(anywhere[name]) == 1 and value not in anywhere[name]:
                    differ.add(name)  # per-rank copies that differ: foreign_copies()
        mine = {tensor_of(n) for n in loaded_names}
        ref = {tensor_of(n) for n in anywhere}
        compared = {tensor_of(n) for n in loaded_names & anywhere.keys() if not is_shard(n)}
        return (
            sorted(differ),
            sorted(mine - ref),
            sorted(ref - mine),
            sorted((mine & ref) - compared),
        )

    def foreign_copies(self) -> list[ForeignCopy]:
        """The ranks that loaded a name they did not save whose saved copies differ.

        An untagged name hashes what the rank holds whole; when the saved ranks hold
        different copies of it, it is state of one rank (an RNG, a data position), and a
        rank without its own copy (a new rank of a grown world) restored another rank's
        (or none): whichever it holds, it is not its own. Local shards are not per-rank
        state but rows of a tensor, compared through its ``@whole`` digest.
        """
        anywhere = self._copies()
        out: list[ForeignCopy] = []
        for rank, state in sorted(self.loaded.items()):
            own = self.saved.get(rank, {})
            names = sorted(
                name
                for name in state
                if not is_shard(name) and name not in own and len(anywhere.get(name, ())) > 1
            )
            if not names:
                continue
            holders = sorted(r for r, saved in self.saved.items() if saved.keys() & names)
            taken = tuple(
                next((r for r in holders if self.saved[r].get(n) == state[n]), None) for n in names
            )
            out.append(ForeignCopy(rank, tuple(names), tuple(holders), taken))
        return out

    def _copies(self) -> dict[str, set[str]]:
        """Name -> every hash a saved rank logged under it."""
        anywhere: dict[str, set[str]] = defaultdict(set)
        for state in self.saved.values():
            for name, value in state.items():
                anywhere[name].add(value)
        return anywhere


class RestoreLayouts:
    """The loads whose cell holds the checkpoint's tensors on other ranks than saved them.

    Per (incarnation, cell, role) of a load: the ranks that loaded and the names each
    logged, against the ranks of the same cell that saved the checkpoint (the lowest
    saving cell when the loading cell did not exist then, e.g. more replicas now). Other
    rank indices, or another set of names on a rank, is another layout.
    """

    def __init__(self, ctx: RunContext) -> None:
        saves: dict[tuple[int, int, str, int], dict[int, State]] = defaultdict(dict)
        loads: dict[tuple[int, int, str], tuple[int, int, int | None, dict[int, State]]] = {}
        for r in ctx.rows(LAYOUTS, label="restore layouts"):
            if r["ckpt_iteration"] is None:
                continue  # a load outside any resume: not a restore of a checkpoint
            state = dict(zip(r["tensors"], r["hashes"], strict=True))
            if r["when"] == "at_save":
                key = (r["incarnation"], r["cell"], r["role"], r["ckpt_iteration"])
                saves[key][r["rank"]] = state  # the latest save of a rank wins
                continue
            place = (r["incarnation"], r["cell"], r["role"])
            it, inc, step, ranks = loads.get(
                place, (r["ckpt_iteration"], r["ckpt_incarnation"], r["step"], {})
            )
            ranks[r["rank"]] = state
            loads[place] = (it, inc, step, ranks)
        self.changed: dict[tuple[int, int, str], LayoutChange] = {}
        """(incarnation, cell, role) -> the cell's restore over another layout."""
        for (inc, cell, role), (it, saved_by, step, loaded) in loads.items():
            ref = saves.get((saved_by, cell, role, it))
            if ref is None:
                cells = sorted(c for (i, c, ro, t) in saves if (i, ro, t) == (saved_by, role, it))
                ref = saves.get((saved_by, cells[0], role, it)) if cells else None
            if ref is None:
                continue  # nothing saved to compare with: FT010 reports the load
            if {k: set(v) for k, v in loaded.items()} != {k: set(v) for k, v in ref.items()}:
                self.changed[(inc, cell, role)] = LayoutChange(
                    inc, cell, role, step, it, saved_by, loaded, ref
                )
