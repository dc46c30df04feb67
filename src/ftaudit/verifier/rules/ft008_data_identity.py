"""FT008 data-identity."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ftaudit.dataset.manifest import DatasetManifest, ManifestError, find_manifest, read_manifest
from ftaudit.eventlog.arrays import unique_sorted
from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.fed import (
    UNKNOWN,
    FedSamples,
    LoaderStateRecord,
    ManifestDeclaration,
    OrderDeclaration,
    StreamMap,
    load_fed,
    load_loader_states,
    load_manifests,
    load_orders,
)
from ftaudit.verifier.findings import Location, Severity, Violation
from ftaudit.verifier.rules.base import Rule, RuleOutcome, order_severity

SHOWN = 6
"""Samples spelled out in one message (all of them are in the violation's ids)."""


@dataclass(frozen=True)
class _Found:
    manifest: DatasetManifest | None
    note: str
    problems: tuple[Violation, ...]


class DataIdentity(Rule):
    """Every committed sample fed the model the content its sample index names.

    A trainer rank logs, per sample, its stream position (sample index) and the
    fingerprint of the tensor the model received (``sample_fingerprints``). The
    position maps to a dataset item through the declared order (``data_order``, e.g.
    a ``DistributedSampler``'s seed and epoch; else item ``i mod N``), and the run's
    manifest (``data_manifest``) gives every item's fingerprint. For every sample of
    the committed history: the fed fingerprint equals the manifest's for its item;
    within an epoch no content is trained twice (by two positions, or by two cells);
    every sample of a committed attempt whose cells were all normal was fingerprinted,
    and none outside the attempt's allocation. Wherever a position was fed more than
    once (cells, ranks, retried attempts, abandoned incarnations) it was fed the same
    content; every incarnation declares the same order for an epoch, and a resumed
    loader holds the state saved with its checkpoint. An order changed at a resume and a
    position fed other content by another incarnation are errors only where the run
    declares its data order deterministic (``deterministic_order=True``), warnings where
    it declares it non-deterministic or does not say (as FT005's holes). Without a
    manifest only these agreements are checked, and the result says so. A run that logs
    no fingerprints passes with a note.

    Fails::

        manifest: item 8 -> fp A, item 0 -> fp B
        step 1 (committed): cell 1 sample_fingerprints positions [8] fingerprints [B]
        -> FT008: position 8 should be item 8 but its content is item 0's

    Passes::

        step 1 (committed): cell 1 sample_fingerprints positions [8] fingerprints [A]
    """

    code = "FT008"
    name = "data-identity"
    kinds: ClassVar[dict[str, str]] = {
        "wrong_content": "a committed sample's content is not the dataset item its index maps to",
        "wrong_item": "the loader read another item than the declared order maps the index to",
        "duplicate_content": "one content trained twice in an epoch (two indices or two cells)",
        "content_disagrees": "one sample index fed with two different contents",
        "unfingerprinted": "a committed sample of an all-normal attempt has no fingerprint",
        "unallocated": "a rank fed a sample index its attempt did not allocate",
        "order_changed": "an incarnation declared another order for an epoch than an earlier one",
        "loader_not_restored": "a resumed loader's position, epoch or seed differs from the saved",
        "loader_state_wrong": "a saved loader position is not where the committed stream stood",
        "dataset_changed": "incarnations declared different dataset manifests",
        "dataset_size": "the declared dataset size differs from the manifest's",
        "manifest_missing": "the manifest the run names cannot be found (agreement checked only)",
        "manifest_unusable": "the manifest the run names is damaged or foreign",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        fed = load_fed(ctx)
        orders = load_orders(ctx)
        found = self._manifest(ctx, load_manifests(ctx))
        manifest = found.manifest
        size = manifest.size if manifest is not None else ctx.dataset_size
        stream = StreamMap(orders, size)
        out: list[Violation] = [*found.problems]
        out += self._orders(ctx, orders)
        note = found.note
        if ctx.scope is None:
            out += self._loader_states(ctx, load_loader_states(ctx), stream)
        else:
            # an incremental window holds every declaration (the incremental module keeps
            # them from the segments before it) but not the committed stream before it
            note = f"{note}; {_INCREMENTAL}"
        if not len(fed):
            note = f"the run logs no sample fingerprints, nothing was compared ({note})"
            return RuleOutcome(0, tuple(out), note=note)
        committed_key = np.asarray([k in ctx.committed_keys for k in fed.keys], dtype=bool)
        committed = committed_key[fed.key]
        epochs, declared = stream.locate(fed.position)
        # where no order is declared, the loader's own per-sample claim maps the position
        claimed = (declared == UNKNOWN) & (fed.claimed_item != UNKNOWN)
        items = np.where(claimed, fed.claimed_item, declared) if claimed.any() else declared
        del claimed
        wrong = np.zeros(len(fed), dtype=bool)
        matches = None
        if manifest is not None:
            matches = _matches(fed.fingerprint, items, manifest)
            wrong = committed & (items != UNKNOWN) & ~matches
            out += self._against_manifest(ctx, fed, wrong, items, epochs, manifest)
        out += self._claims(ctx, fed, committed, declared, stream)
        out += self._duplicates(ctx, fed, committed & ~wrong, epochs, items, manifest)
        out += self._coverage(ctx, fed, committed_key)
        out += self._agreement(ctx, fed, wrong, matches)
        return RuleOutcome(int(committed.sum()), tuple(out), note=note)

    # -- the dataset: which manifest, if any ------------------------------------------

    def _manifest(self, ctx: RunContext, declared: list[ManifestDeclaration]) -> _Found:
        extra = list(ctx.data_manifests)
        if not declared:
            if not extra:
                return _Found(None, _NO_MANIFEST, ())
            given = read_manifest(extra[0])
            return _Found(given, f"checked against the manifest {extra[0]} given to verify", ())
        problems = []
        first = declared[0]
        for other in declared[1:]:
            if other.digest != first.digest:
                problems.append(
                    self.violation(
                        f"incarnation {other.incarnation} declared dataset manifest "
                        f"{other.digest[:16]} but incarnation {first.incarnation} declared "
                        f"{first.digest[:16]}: the run changed its dataset",
                        kind="dataset_changed",
                        location=Location(incarnation=other.incarnation),
                    )
                )
                break
        try:
            manifest = find_manifest(ctx.session.run_dir, first.digest, extra)
        except ManifestError as exc:
            problems.append(
                self.violation(
                    f"the run's dataset manifest is unusable: {exc}", kind="manifest_unusable"
                )
            )
            return _Found(None, _NO_MANIFEST, tuple(problems))
        if manifest is None:
            problems.append(
                self.violation(
                    f"the run names dataset manifest {first.digest[:16]} (size "
                    f"{first.dataset_size}) but it is neither in the run's manifests/ folder "
                    "nor given with --data-manifest: fingerprints were checked for agreement "
                    "only",
                    severity=Severity.WARNING,
                    kind="manifest_missing",
                )
            )
            return _Found(None, _NO_MANIFEST, tuple(problems))
        if ctx.dataset_size and ctx.dataset_size != manifest.size:
            problems.append(
                self.violation(
                    f"the run declares a dataset of {ctx.dataset_size} items but its manifest "
                    f"{manifest.digest[:16]} holds {manifest.size}",
                    kind="dataset_size",
                )
            )
        note = f"checked against dataset manifest {manifest.digest[:16]}"
        return _Found(manifest, note, tuple(problems))

    # -- declarations: orders and loader states ---------------------------------------

    def _orders(self, ctx: RunContext, orders: list[OrderDeclaration]) -> list[Violation]:
        first: dict[int, OrderDeclaration] = {}
        out = []
        reported: set[tuple[int, int]] = set()
        for order in orders:
            ref = first.setdefault(order.epoch, order)
            if order.digest == ref.digest or (order.incarnation, order.epoch) in reported:
                continue
            reported.add((order.incarnation, order.epoch))
            n = min(ref.items.size, order.items.size)
            differ = np.flatnonzero(ref.items[:n] != order.items[:n])
            at = int(differ[0]) if differ.size else n
            example = (
                f"position {ref.start + at} reads item {int(order.items[at])} instead of item "
                f"{int(ref.items[at])}"
                if at < n
                else f"the epoch has {order.items.size} positions instead of {ref.items.size}"
            )
            seeds = f" (seed {order.seed} instead of {ref.seed})" if order.seed != ref.seed else ""
            out.append(
                self.violation(
                    f"incarnation {order.incarnation} declared another order for epoch "
                    f"{order.epoch} than incarnation {ref.incarnation}{seeds}: "
                    f"{int(differ.size)} of {n} positions map to other items; {example}. "
                    "The loader's shuffle state (seed, epoch or generator) was not restored",
                    kind="order_changed",
                    location=Location(incarnation=order.incarnation),
                    severity=order_severity(ctx),
                )
            )
        return out

    def _loader_states(
        self, ctx: RunContext, states: list[LoaderStateRecord], stream: StreamMap
    ) -> list[Violation]:
        saved = {(s.incarnation, s.iteration): s for s in states if s.when == "saved"}
        out = []
        for s in states:
            if s.when != "resumed":
                continue
            inc = ctx.incarnations.get(s.incarnation)
            source = inc.resumed_incarnation if inc is not None else None
            ref = saved.get((source, s.iteration)) if source is not None else None
            if ref is None:
                continue
            diffs = [
                f"{name} {mine} instead of {theirs}"
                for name, mine, theirs in (
                    ("position", s.position, ref.position),
                    ("epoch", s.epoch, ref.epoch),
                    ("seed", s.seed, ref.seed),
                )
                if mine != theirs
            ]
            if diffs:
                out.append(
                    self.violation(
                        f"incarnation {s.incarnation} resumed its data loader from checkpoint "
                        f"{s.iteration} with {', '.join(diffs)} (saved by incarnation "
                        f"{source}): the loader state was not restored",
                        kind="loader_not_restored",
                        location=Location(step=s.iteration, incarnation=s.incarnation),
                    )
                )
        out += self._saved_positions(ctx, saved, stream)
        return out

    def _saved_positions(
        self,
        ctx: RunContext,
        saved: dict[tuple[int, int], LoaderStateRecord],
        stream: StreamMap,
    ) -> list[Violation]:
        """A saved loader position must be where the committed stream stood at that step."""
        if not saved or ctx.deterministic_order is not True:
            return []
        committed = [a for a in ctx.allocations if a.key in ctx.committed_keys and a.num_ids]
        out = []
        for (inc, iteration), s in sorted(saved.items()):
            upto = [a for a in committed if a.step <= iteration]
            if not upto or any(a.step == iteration and a.incarnation != inc for a in upto):
                continue  # that checkpoint's steps are not all in the committed history
            last = max(int(a.sample_indices.to_array().max()) for a in upto)
            allowed = {last + 1, stream.epoch_after(last)}
            if s.position not in allowed:
                out.append(
                    self.violation(
                        f"the data loader state saved with checkpoint {iteration} (incarnation "
                        f"{inc}) reads next from stream position {s.position}, but the "
                        f"committed steps up to {iteration} consumed positions up to {last}: "
                        "a resume from it feeds other items than the sample indices say",
                        kind="loader_state_wrong",
                        location=Location(step=iteration, incarnation=inc),
                    )
                )
        return out

    # -- per sample ---------------------------------------------------------------------

    def _against_manifest(
        self,
        ctx: RunContext,
        fed: FedSamples,
        wrong: np.ndarray,
        items: np.ndarray,
        epochs: np.ndarray,
        manifest: DatasetManifest,
    ) -> list[Violation]:
        """The committed samples in ``wrong``: an item named, but not its content."""
        if not wrong.any():
            return []
        owners = manifest.items_with(fed.fingerprint[wrong].tolist())
        out = []
        for (key, cell), rows in _groups(fed, wrong).items():
            parts = []
            for row in rows[:SHOWN]:
                pos, item = int(fed.position[row]), int(items[row])
                content = owners.get(int(fed.fingerprint[row]), [])
                what = (
                    f"item {_items_text(content)}'s"
                    if content
                    else "found in no item of the dataset"
                )
                where = f" (epoch {int(epochs[row])})" if epochs[row] != UNKNOWN else ""
                should = f"item {item}" if 0 <= item < manifest.size else f"item {item} (beyond it)"
                parts.append(f"position {pos}{where} should be {should} but its content is {what}")
            more = f"; ... {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
            positions = fed.position[rows]
            out.append(
                self.violation(
                    f"{len(rows)} sample{_s(len(rows))} fed by cell {cell} in "
                    f"{_key_text(ctx, fed.keys[key])} {'are' if len(rows) != 1 else 'is'} not "
                    f"the dataset item{_s(len(rows))} {'their' if len(rows) != 1 else 'its'} "
                    f"sample index names: {'; '.join(parts)}{more}",
                    kind="wrong_content",
                    location=_location(fed.keys[key], cell),
                    ids=positions.tolist(),
                    sample_indices=positions.tolist(),
                )
            )
        return out

    def _claims(
        self,
        ctx: RunContext,
        fed: FedSamples,
        committed: np.ndarray,
        declared: np.ndarray,
        stream: StreamMap,
    ) -> list[Violation]:
        """The loader's per-sample item must be the declared order's item for the position."""
        if not stream.declared:
            return []
        bad = committed & (fed.claimed_item != UNKNOWN) & (declared != UNKNOWN)
        bad &= fed.claimed_item != declared
        out = []
        for (key, cell), rows in _groups(fed, bad).items():
            shown = "; ".join(
                f"position {int(fed.position[r])} read item {int(fed.claimed_item[r])} instead "
                f"of item {int(declared[r])}"
                for r in rows[:SHOWN]
            )
            positions = fed.position[rows]
            out.append(
                self.violation(
                    f"the data loader of cell {cell} in {_key_text(ctx, fed.keys[key])} read "
                    f"{len(rows)} item{_s(len(rows))} other than the declared order says: "
                    f"{shown}",
                    kind="wrong_item",
                    location=_location(fed.keys[key], cell),
                    ids=positions.tolist(),
                    sample_indices=positions.tolist(),
                )
            )
        return out

    def _duplicates(
        self,
        ctx: RunContext,
        fed: FedSamples,
        mask: np.ndarray,
        epochs: np.ndarray,
        items: np.ndarray,
        manifest: DatasetManifest | None,
    ) -> list[Violation]:
        """Within an epoch, one content trained twice: at two positions, or by two cells."""
        rows = _duplicate_candidates(fed, mask & (epochs != UNKNOWN), epochs, manifest)
        if rows.size == 0:
            return []
        # sorted by (epoch, fingerprint, position, cell), the first feeding of each first
        # (a stable sort); ranks of one cell feeding one position (tensor or context
        # parallel) count once
        epoch, fp = epochs[rows], fed.fingerprint[rows]
        position, cell = fed.position[rows], fed.cell[rows]
        order = np.lexsort((cell, position, fp, epoch))
        columns = (epoch[order], fp[order], position[order], cell[order])
        new = np.ones(order.size, dtype=bool)
        new[1:] = np.any([c[1:] != c[:-1] for c in columns], axis=0)
        kept = order[new]
        rows, epoch, fp = rows[kept], epoch[kept], fp[kept]
        # groups of one content in one epoch; only those fed at least twice are looked at
        starts = np.flatnonzero(np.r_[True, (epoch[1:] != epoch[:-1]) | (fp[1:] != fp[:-1])])
        sizes = np.diff(np.r_[starts, rows.size])
        found: dict[tuple[int, bool, tuple[tuple[int, int], ...]], list[list[int]]] = defaultdict(
            list
        )
        for start, size in zip(
            starts[sizes >= 2].tolist(), sizes[sizes >= 2].tolist(), strict=True
        ):
            members = rows[start : start + size].tolist()
            epoch_of = int(epoch[start])
            by_two_cells = len({int(fed.position[r]) for r in members}) < len(members)
            if not by_two_cells:
                named = {int(items[r]) for r in members}
                if UNKNOWN not in named and len(named) == 1:
                    continue  # the declared order itself repeats the item (a padded epoch)
                if manifest is not None:
                    continue  # each matched its own item: the dataset holds equal items
            where = tuple(sorted({(int(fed.key[r]), int(fed.cell[r])) for r in members}))
            found[(epoch_of, by_two_cells, where)].append(members)
        out = []
        for (epoch, by_two_cells, where), findings in sorted(found.items()):
            out.append(self._duplicate(ctx, fed, items, epoch, by_two_cells, where, findings))
        return out

    def _duplicate(
        self,
        ctx: RunContext,
        fed: FedSamples,
        items: np.ndarray,
        epoch: int,
        by_two_cells: bool,
        where: tuple[tuple[int, int], ...],
        findings: list[list[int]],
    ) -> Violation:
        """One violation for the contents trained twice by the same attempts and cells."""
        findings = sorted(findings, key=lambda m: min(int(fed.position[r]) for r in m))
        rows = [r for members in findings for r in members]
        positions = sorted({int(fed.position[r]) for r in rows})
        cells = sorted({cell for _, cell in where})
        times = max(len(m) for m in findings)
        named = [sorted({int(items[r]) for r in m} - {UNKNOWN}) for m in findings]
        same_item = all(len(n) == 1 for n in named)
        if len(findings) == 1:
            what = f"item {named[0][0]} was" if same_item else "the same content was"
        elif same_item:
            what = f"{len(findings)} items {_items_text(sorted(n[0] for n in named), 6)} were each"
        else:
            what = f"{len(findings)} contents were each"
        if by_two_cells:
            keys = sorted({key for key, _ in where})
            shown = f"at positions {_positions_text(np.asarray(positions))} in " + ", ".join(
                _key_text(ctx, fed.keys[key]) for key in keys
            )
            more = ""
        else:
            shown = ", ".join(
                f"position {int(fed.position[r])}"
                + ("" if same_item else f" (item {int(items[r])})")
                + f" in {_key_text(ctx, fed.keys[int(fed.key[r])])}"
                for r in findings[0][:SHOWN]
            )
            more = f"; and {len(findings) - 1} more like it" if len(findings) > 1 else ""
        k = fed.keys[where[0][0]]
        return self.violation(
            f"{what} trained {times} times in epoch {epoch}"
            + (f" by cells {', '.join(map(str, cells))}" if by_two_cells else "")
            + f": {shown}{more}; the same data reached the model twice",
            kind="duplicate_content",
            location=Location(step=k[1], attempt=k[2], incarnation=k[0]),
            ids=positions,
            sample_indices=positions,
        )

    def _coverage(
        self, ctx: RunContext, fed: FedSamples, committed_key: np.ndarray
    ) -> list[Violation]:
        """Committed samples without a fingerprint, and fed samples outside the allocation."""
        # the samples are grouped by attempt: one slice per committed attempt
        bounds = fed.key_bounds()
        by_key = {
            fed.keys[k]: unique_sorted(fed.position[bounds[k] : bounds[k + 1]])
            for k in np.flatnonzero(committed_key).tolist()
        }
        normal = {s.key: all(c.all_normal for c in s.cells.values()) for s in ctx.committed}
        # an attempt may allocate once per micro-batch (gradient accumulation): its
        # allocation is the union of them
        allocations: dict[StepKey, list[np.ndarray]] = defaultdict(list)
        for a in ctx.allocations:
            if a.key in ctx.committed_keys and a.num_ids:
                allocations[a.key].append(a.sample_indices.to_array())
        out = []
        for key, parts in allocations.items():
            incarnation, step, attempt = key
            if step < ctx.since:
                continue  # incremental: its samples' rows lie before the window
            allocated = unique_sorted(np.concatenate(parts))
            seen = by_key.get(key, np.empty(0, dtype=np.int64))
            if np.array_equal(allocated, seen):
                continue  # the usual case, without two set differences
            missing = np.setdiff1d(allocated, seen, assume_unique=True)
            extra = np.setdiff1d(seen, allocated, assume_unique=True)
            where = _key_text(ctx, key)
            if missing.size and normal.get(key, False):
                out.append(
                    self.violation(
                        f"{missing.size} sample{_s(missing.size)} "
                        f"{_positions_text(missing)} of {where} "
                        "were trained without a fingerprint: no rank logged what it fed for "
                        f"{'them' if missing.size != 1 else 'it'}",
                        kind="unfingerprinted",
                        location=Location(step, attempt, incarnation),
                        ids=missing.tolist(),
                        sample_indices=missing.tolist(),
                    )
                )
            if extra.size:
                out.append(
                    self.violation(
                        f"{extra.size} sample{_s(extra.size)} {_positions_text(extra)} "
                        f"fed in {where} {'were' if extra.size != 1 else 'was'} not allocated "
                        "to it: a rank trained data the driver did not hand out",
                        kind="unallocated",
                        location=Location(step, attempt, incarnation),
                        ids=extra.tolist(),
                        sample_indices=extra.tolist(),
                    )
                )
        return out

    def _agreement(
        self,
        ctx: RunContext,
        fed: FedSamples,
        explained: np.ndarray,
        matches: np.ndarray | None,
    ) -> list[Violation]:
        """Every feeding of one position (any cell, attempt, incarnation) has one content."""
        if not len(fed):
            return []
        # only a position fed twice can disagree, and it does iff its smallest and
        # largest fingerprints differ: a scatter per slot, not a sort of every sample
        rows, slots = fed.fed_twice()
        fp = fed.fingerprint[rows]
        low = np.full(int(slots.max()) + 1 if slots.size else 0, np.iinfo(np.int64).max)
        high = np.full(low.size, np.iinfo(np.int64).min)
        np.minimum.at(low, slots, fp)
        np.maximum.at(high, slots, fp)
        rows = rows[(low != high)[slots]]
        # the disagreeing samples by position, each position's in logging order
        order = rows[np.argsort(fed.position[rows], kind="stable")]
        pos = fed.position[order]
        skip = set(fed.position[explained].tolist())
        conflicted = sorted(set(pos.tolist()) - skip)
        groups: dict[tuple[StepKey, StepKey], list[tuple[int, int, int, int, int]]] = defaultdict(
            list
        )
        lo = np.searchsorted(pos, conflicted, side="left")
        hi = np.searchsorted(pos, conflicted, side="right")
        for p, a0, b0 in zip(conflicted, lo.tolist(), hi.tolist(), strict=True):
            rows = order[a0:b0]  # in logging order: the first feeding is the base
            base = rows[0]
            other = next(r for r in rows[1:] if fed.fingerprint[r] != fed.fingerprint[base])
            a, b = fed.keys[int(fed.key[base])], fed.keys[int(fed.key[other])]
            groups[(a, b)].append((p, int(fed.cell[base]), int(fed.cell[other]), base, other))
        out = []
        for (a, b), hits in groups.items():
            positions = [h[0] for h in hits]
            arr = np.asarray(positions, dtype=np.int64)
            cells_a = sorted({h[1] for h in hits})
            cells_b = sorted({h[2] for h in hits})
            verdict = ""
            if matches is not None:
                first_ok = [bool(matches[h[3]]) for h in hits]
                second_ok = [bool(matches[h[4]]) for h in hits]
                if all(first_ok) and not any(second_ok):
                    verdict = f"; the dataset's items are what {_key_text(ctx, a)} fed"
                elif all(second_ok) and not any(first_ok):
                    verdict = f"; the dataset's items are what {_key_text(ctx, b)} fed"
            same_attempt = a == b
            # another incarnation may feed a position other content only where the order
            # is not declared reproducible
            severity = Severity.ERROR if a[0] == b[0] else order_severity(ctx)
            if same_attempt:
                both = " and ".join(map(str, sorted(set(cells_a) | set(cells_b))))
                text = f"cells {both} fed different content in {_key_text(ctx, a)}"
            else:
                text = (
                    f"{_key_text(ctx, b)} (cell {_items_text(cells_b)}) fed different content "
                    f"than {_key_text(ctx, a)} (cell {_items_text(cells_a)})"
                )
            out.append(
                self.violation(
                    f"{text} for {arr.size} sample{_s(arr.size)} "
                    f"{_positions_text(arr)}: one sample index, two data{verdict}",
                    kind="content_disagrees",
                    location=Location(
                        b[1], b[2], b[0], cell=cells_b[0] if len(cells_b) == 1 else None
                    ),
                    ids=positions,
                    sample_indices=positions,
                    severity=severity,
                )
            )
        return out


_INCREMENTAL = (
    "incremental verification: the loaded steps only (loader states and repeats of a "
    "content before them are checked by a full ft-verify)"
)
_NO_MANIFEST = (
    "no dataset manifest: checked that every cell, attempt and incarnation fed the same "
    "content for a sample index, not that it is the dataset's item"
)


def _groups(fed: FedSamples, mask: np.ndarray) -> dict[tuple[int, int], list[int]]:
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    for row in np.flatnonzero(mask).tolist():
        groups[(int(fed.key[row]), int(fed.cell[row]))].append(row)
    return dict(sorted(groups.items(), key=lambda kv: fed.keys[kv[0][0]][1:] + kv[0]))


CHUNK = 1 << 20
"""Samples compared with the manifest at a time: its gathered fingerprints are a
temporary as large as the chunk, not as the run (41 M samples: 330 MB)."""


def _matches(fingerprint: np.ndarray, items: np.ndarray, manifest: DatasetManifest) -> np.ndarray:
    """Per sample: its item is one of the manifest's and it fed that item's fingerprint."""
    out = np.empty(fingerprint.size, dtype=bool)
    last = manifest.size - 1
    for lo in range(0, fingerprint.size, CHUNK):
        item = items[lo : lo + CHUNK]
        known = (item >= 0) & (item <= last)
        expected = manifest.fingerprints[np.clip(item, 0, max(last, 0))] if last >= 0 else item
        out[lo : lo + CHUNK] = known & (fingerprint[lo : lo + CHUNK] == expected)
    return out


def _duplicate_candidates(
    fed: FedSamples, mask: np.ndarray, epochs: np.ndarray, manifest: DatasetManifest | None
) -> np.ndarray:
    """The samples of ``mask`` (ascending) that may share an (epoch, content) group with
    another: every member of each such group, so the groups judged are whole.

    Sorting every committed sample by four keys cost most of FT008's time and memory.
    Without a manifest, any group of two or more may be a finding: the samples whose
    (epoch, fingerprint) hash occurs twice are kept (a hash collision only adds whole
    groups). With one, only a group holding one position fed by two cells is (a
    content at two positions matched its own item each): the contents fed at positions
    that two committed runs fed, and every sample of those contents.
    """
    if manifest is None:
        rows = np.flatnonzero(mask)
        mixed = fed.fingerprint[rows].view(np.uint64) ^ (
            epochs[rows].view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        )
        return rows[_repeated(mixed)]
    twice, _ = fed.fed_twice(_keys_of(fed, mask))
    twice = twice[mask[twice]]
    if twice.size == 0:
        return twice
    contents = np.unique(fed.fingerprint[twice])
    rows = np.flatnonzero(mask)
    return rows[_member(fed.fingerprint[rows], contents)]


def _keys_of(fed: FedSamples, mask: np.ndarray) -> np.ndarray:
    """Over :attr:`FedSamples.keys`: whether any sample of ``mask`` has that attempt."""
    return np.bincount(fed.key[mask], minlength=len(fed.keys)) > 0


def _repeated(values: np.ndarray) -> np.ndarray:
    """A mask over ``values``: those that occur more than once."""
    ordered = np.sort(values)
    again = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    return _member(values, again)


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """A mask over ``values``: those in ``sorted_set`` (sorted, unique), by binary search."""
    if sorted_set.size == 0:
        return np.zeros(values.shape, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, values), sorted_set.size - 1)
    return sorted_set[at] == values


def _positions_text(positions: np.ndarray, limit: int = 12) -> str:
    """Sample indices as runs, ``[56..63, 80]``: their items depend on the declared order."""
    values = np.unique(np.asarray(positions, dtype=np.int64))
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    runs = np.split(values, breaks)
    shown = [f"{r[0]}..{r[-1]}" if r.size > 1 else str(r[0]) for r in runs[:limit]]
    more = f", ... {len(runs) - limit} more" if len(runs) > limit else ""
    return f"[{', '.join(shown)}{more}]"


def _key_text(ctx: RunContext, key: StepKey) -> str:
    return ctx.describe_key(key)


def _location(key: StepKey, cell: int) -> Location:
    return Location(step=key[1], attempt=key[2], incarnation=key[0], cell=cell)


def _items_text(items: list[int], limit: int = 3) -> str:
    shown = ", ".join(map(str, items[:limit]))
    return shown + (f" (and {len(items) - limit} more)" if len(items) > limit else "")


def _s(n: int) -> str:
    return "" if n == 1 else "s"
