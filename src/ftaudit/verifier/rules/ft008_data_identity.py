"""FT008 data-identity."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ftaudit.dataset.manifest import DatasetManifest, ManifestError
from ftaudit.eventlog.arrays import in_sorted, unique_sorted
from ftaudit.eventlog.intruns import IntRuns
from ftaudit.verifier.context import RunContext, StepKey
from ftaudit.verifier.fed import (
    UNKNOWN,
    FedChunk,
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
from ftaudit.verifier.rules.content_ledger import NO_ATTEMPT, ContentLedger, Contents, mix
from ftaudit.verifier.rules.stream_ledger import StreamHigh, committed_high
from ftaudit.verifier.spans import grouped_spans

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
        high = committed_high(ctx) if ctx.deterministic_order is True else None
        states = load_loader_states(ctx)
        saved = _saved(states)
        # a window holds the drivers' rows from T on: the state saved at a resume point
        # (the step before the window) and the resumed one that a new segment brings
        out += self._resumed_loaders(ctx, states, saved)
        if high is not None:
            # an incremental window holds every declaration (the incremental module keeps
            # them from the segments before it) but not the committed stream before it:
            # a saved loader is checked where the window or the follower's ledger has it
            out += self._saved_positions(ctx, saved, stream, high)
        carried = ctx.carried(ContentLedger) if ctx.following else None
        if carried is not None:
            carried.before(ctx.since)
        if ctx.scope is not None:
            note = f"{note}; {_INCREMENTAL}"
        if not len(fed):
            note = f"the run logs no sample fingerprints, nothing was compared ({note})"
            return RuleOutcome(0, tuple(out), note=note)
        committed_key = np.asarray([k in ctx.committed_keys for k in fed.keys], dtype=bool)
        judged = _judge(fed, stream, committed_key, manifest)
        window = None
        if carried is not None:
            rows = np.flatnonzero(judged.mask & _ledger_rows(fed, ctx.since - 1))
            contents = _contents(fed, rows, stream)
            by_position = manifest is not None
            if not carried.holds(contents, by_position=by_position):
                floor = max(int(contents.epoch.min()) - 1, 0)
                earlier = _committed_before(ctx, stream, manifest, contents, floor)
                carried.refold(floor, earlier, by_position=by_position)
            window = _Window(rows, contents, carried)
            carried.saw(contents, by_position=by_position)
        if manifest is not None:
            out += self._against_manifest(ctx, fed, judged.wrong, stream, manifest)
        out += self._claims(ctx, fed, judged.claims, stream)
        out += self._duplicates(ctx, fed, judged, stream, manifest, window)
        out += self._coverage(ctx, fed, committed_key)
        out += self._agreement(ctx, fed, judged.wrong, stream, manifest)
        return RuleOutcome(judged.committed, tuple(out), note=note)

    # -- the dataset: which manifest, if any ------------------------------------------

    def _manifest(self, ctx: RunContext, declared: list[ManifestDeclaration]) -> _Found:
        extra = list(ctx.data_manifests)
        if not declared:
            if not extra:
                return _Found(None, _NO_MANIFEST, ())
            given = ctx.dataset_manifest(None)
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
            manifest = ctx.dataset_manifest(first.digest)
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

    def _resumed_loaders(
        self,
        ctx: RunContext,
        states: list[LoaderStateRecord],
        saved: dict[tuple[int, int], LoaderStateRecord],
    ) -> list[Violation]:
        """A resumed loader must hold the position, epoch and seed saved with the
        checkpoint it resumed from (judged where the window holds both)."""
        out = []
        for s in states:
            if s.when != "resumed" or not ctx.judges(s.iteration, s.segment):
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
                        location=Location(
                            step=s.iteration, incarnation=s.incarnation, segment=s.segment
                        ),
                    )
                )
        return out

    def _saved_positions(
        self,
        ctx: RunContext,
        saved: dict[tuple[int, int], LoaderStateRecord],
        stream: StreamMap,
        high: StreamHigh,
    ) -> list[Violation]:
        """A saved loader position must be where the committed stream stood at that step
        (``high``: how far it had read, :mod:`~ftaudit.verifier.rules.stream_ledger`)."""
        out = []
        for (inc, iteration), s in sorted(saved.items()):
            last = high(inc, iteration)
            if last is None:
                continue
            allowed = {last + 1, stream.epoch_after(last)}
            if s.position not in allowed:
                out.append(
                    self.violation(
                        f"the data loader state saved with checkpoint {iteration} (incarnation "
                        f"{inc}) reads next from stream position {s.position}, but the "
                        f"committed steps up to {iteration} consumed positions up to {last}: "
                        "a resume from it feeds other items than the sample indices say",
                        kind="loader_state_wrong",
                        location=Location(step=iteration, incarnation=inc, segment=s.segment),
                    )
                )
        return out

    # -- per sample ---------------------------------------------------------------------

    def _against_manifest(
        self,
        ctx: RunContext,
        fed: FedSamples,
        wrong: np.ndarray,
        stream: StreamMap,
        manifest: DatasetManifest,
    ) -> list[Violation]:
        """The committed samples ``wrong``: an item named, but not its content."""
        if not wrong.size:
            return []
        fingerprint = fed.fingerprint(wrong)
        positions = fed.position(wrong)
        epochs, _, items = _place(stream, positions, fed.claimed_item(wrong))
        owners = manifest.items_with(fingerprint.tolist())
        out = []
        for (key, cell), rows in _groups(fed, wrong).items():
            parts = []
            for row in rows[:SHOWN]:
                pos, item = int(positions[row]), int(items[row])
                content = owners.get(int(fingerprint[row]), [])
                what = (
                    f"item {_items_text(content)}'s"
                    if content
                    else "found in no item of the dataset"
                )
                where = f" (epoch {int(epochs[row])})" if epochs[row] != UNKNOWN else ""
                should = f"item {item}" if 0 <= item < manifest.size else f"item {item} (beyond it)"
                parts.append(f"position {pos}{where} should be {should} but its content is {what}")
            more = f"; ... {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
            shown = positions[rows]
            out.append(
                self.violation(
                    f"{len(rows)} sample{_s(len(rows))} fed by cell {cell} in "
                    f"{_key_text(ctx, fed.keys[key])} {'are' if len(rows) != 1 else 'is'} not "
                    f"the dataset item{_s(len(rows))} {'their' if len(rows) != 1 else 'its'} "
                    f"sample index names: {'; '.join(parts)}{more}",
                    kind="wrong_content",
                    location=_location(fed.keys[key], cell),
                    ids=shown.tolist(),
                    sample_indices=shown.tolist(),
                )
            )
        return out

    def _claims(
        self, ctx: RunContext, fed: FedSamples, bad: np.ndarray, stream: StreamMap
    ) -> list[Violation]:
        """The loader's per-sample item must be the declared order's item for the position:
        ``bad``, the committed samples whose claim differs from it."""
        if not bad.size:
            return []
        positions = fed.position(bad)
        claimed = fed.claimed_item(bad)
        _, declared, _ = _place(stream, positions, claimed)
        out = []
        for (key, cell), rows in _groups(fed, bad).items():
            shown = "; ".join(
                f"position {int(positions[r])} read item {int(claimed[r])} instead "
                f"of item {int(declared[r])}"
                for r in rows[:SHOWN]
            )
            listed = positions[rows]
            out.append(
                self.violation(
                    f"the data loader of cell {cell} in {_key_text(ctx, fed.keys[key])} read "
                    f"{len(rows)} item{_s(len(rows))} other than the declared order says: "
                    f"{shown}",
                    kind="wrong_item",
                    location=_location(fed.keys[key], cell),
                    ids=listed.tolist(),
                    sample_indices=listed.tolist(),
                )
            )
        return out

    def _duplicates(
        self,
        ctx: RunContext,
        fed: FedSamples,
        judged: _Judged,
        stream: StreamMap,
        manifest: DatasetManifest | None,
        window: _Window | None,
    ) -> list[Violation]:
        """Within an epoch, one content trained twice: at two positions, or by two cells
        (for a follower, also with the samples of its ledger: ``window``)."""
        chosen = _duplicate_candidates(fed, judged, stream, manifest)
        earlier = None
        found = window.ledger.matching(window.contents) if window is not None else None
        if found is not None:  # a content of the window was fed before it
            hit, earlier = found
            chosen = np.union1d(chosen, window.rows[hit])
        if chosen.size == 0:
            return []
        samples = _contents(fed, chosen, stream)
        if earlier is not None:
            samples = Contents.joined((samples, earlier))
        keys, key = _keys(samples)
        # in key order, so that the first feeding of each is the earliest (a stable sort)
        by_key = np.argsort(key, kind="stable")
        samples, key = samples.take(by_key), key[by_key]
        epoch, fp = samples.epoch, samples.fingerprint
        position, cell, items = samples.position, samples.cell, samples.item
        # sorted by (epoch, fingerprint, position, cell), the first feeding of each first
        # (a stable sort); ranks of one cell feeding one position (tensor or context
        # parallel) count once
        order = np.lexsort((cell, position, fp, epoch))
        columns = (epoch[order], fp[order], position[order], cell[order])
        new = np.ones(order.size, dtype=bool)
        new[1:] = np.any([c[1:] != c[:-1] for c in columns], axis=0)
        rows = order[new]
        epoch, fp = epoch[rows], fp[rows]
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
            by_two_cells = len({int(position[r]) for r in members}) < len(members)
            if not by_two_cells:
                named = {int(items[r]) for r in members}
                if UNKNOWN not in named and len(named) == 1:
                    continue  # the declared order itself repeats the item (a padded epoch)
                if manifest is not None:
                    continue  # each matched its own item: the dataset holds equal items
            where = tuple(sorted({(int(key[r]), int(cell[r])) for r in members}))
            found[(epoch_of, by_two_cells, where)].append(members)
        named_samples = _Samples(position, key, cell, items, keys)
        return [
            self._duplicate(ctx, named_samples, epoch, by_two_cells, where, findings)
            for (epoch, by_two_cells, where), findings in sorted(found.items())
        ]

    def _duplicate(
        self,
        ctx: RunContext,
        samples: _Samples,
        epoch: int,
        by_two_cells: bool,
        where: tuple[tuple[int, int], ...],
        findings: list[list[int]],
    ) -> Violation:
        """One violation for the contents trained twice by the same attempts and cells
        (``findings``: groups of indices into ``samples``)."""
        findings = sorted(findings, key=lambda m: min(int(samples.position[r]) for r in m))
        rows = [r for members in findings for r in members]
        positions = sorted({int(samples.position[r]) for r in rows})
        cells = sorted({cell for _, cell in where})
        times = max(len(m) for m in findings)
        named = [sorted({int(samples.items[r]) for r in m} - {UNKNOWN}) for m in findings]
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
                samples.key_text(ctx, key) for key in keys
            )
            more = ""
        else:
            shown = ", ".join(
                f"position {int(samples.position[r])}"
                + ("" if same_item else f" (item {int(samples.items[r])})")
                + f" in {samples.key_text(ctx, int(samples.key[r]))}"
                for r in findings[0][:SHOWN]
            )
            more = f"; and {len(findings) - 1} more like it" if len(findings) > 1 else ""
        k = samples.keys[where[0][0]]
        last = samples.keys[where[-1][0]]  # ``where`` is in key order: the latest feeding
        return self.violation(
            f"{what} trained {times} times in epoch {epoch}"
            + (f" by cells {', '.join(map(str, cells))}" if by_two_cells else "")
            + f": {shown}{more}; the same data reached the model twice",
            kind="duplicate_content",
            location=Location(step=k[1], attempt=k[2], incarnation=k[0]),
            ids=positions,
            sample_indices=positions,
            shown_at=last[1] if last != k else None,
        )

    def _coverage(
        self, ctx: RunContext, fed: FedSamples, committed_key: np.ndarray
    ) -> list[Violation]:
        """Committed samples without a fingerprint, and fed samples outside the allocation."""
        index = {fed.keys[k]: k for k in np.flatnonzero(committed_key).tolist()}
        normal = {s.key: all(c.all_normal for c in s.cells.values()) for s in ctx.committed}
        # an attempt may allocate once per micro-batch (gradient accumulation): its
        # allocation is the union of them
        allocations: dict[StepKey, list[IntRuns]] = defaultdict(list)
        for a in ctx.allocations:
            if a.key in ctx.committed_keys and a.num_ids:
                allocations[a.key].append(a.sample_indices)
        # the usual case, every attempt fed exactly its allocation, in one numpy pass
        alike = _fed_as_allocated(fed, index, allocations)
        out = []
        for key, parts in allocations.items():
            incarnation, step, attempt = key
            if step < ctx.since:
                continue  # incremental: its samples' rows lie before the window
            if key in alike:
                continue
            allocated = unique_sorted(np.concatenate([p.to_array() for p in parts]))
            at = index.get(key)
            seen = fed.key_positions(at) if at is not None else np.empty(0, dtype=np.int64)
            if np.array_equal(allocated, seen):
                continue
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
        stream: StreamMap,
        manifest: DatasetManifest | None,
    ) -> list[Violation]:
        """Every feeding of one position (any cell, attempt, incarnation) has one content;
        the samples ``explained`` (not their item's content) are reported already."""
        if not len(fed):
            return []
        # only a position fed twice can disagree, and it does iff its smallest and
        # largest fingerprints differ: a scatter per slot, not a sort of every sample
        disagree = [np.empty(0, dtype=np.int64)]
        for rows, slots, fp in fed.fed_twice():
            local = slots - slots.min()  # a chunk's slots are one range
            low = np.full(int(local.max()) + 1, np.iinfo(np.int64).max)
            high = np.full(low.size, np.iinfo(np.int64).min)
            np.minimum.at(low, local, fp)
            np.maximum.at(high, local, fp)
            disagree.append(rows[(low != high)[local]])
        # every sample of a position lies in one chunk, in logging order there
        rows = np.concatenate(disagree)
        # the disagreeing samples by position, each position's in logging order
        at = fed.position(rows)
        by_position = np.argsort(at, kind="stable")
        order, pos = rows[by_position], at[by_position]
        skip = set(fed.position(explained).tolist())
        conflicted = sorted(set(pos.tolist()) - skip)
        lo = np.searchsorted(pos, conflicted, side="left")
        hi = np.searchsorted(pos, conflicted, side="right")
        fed_fp = fed.fingerprint(order).tolist()
        pairs = []
        for a0, b0 in zip(lo.tolist(), hi.tolist(), strict=True):
            # in logging order: the first feeding is the base
            other = next(i for i in range(a0 + 1, b0) if fed_fp[i] != fed_fp[a0])
            pairs.append((int(order[a0]), int(order[other])))
        bases = np.asarray([b for b, _ in pairs], dtype=np.int64)
        others = np.asarray([o for _, o in pairs], dtype=np.int64)
        base_key, other_key = fed.key(bases).tolist(), fed.key(others).tolist()
        base_cell, other_cell = fed.cell(bases).tolist(), fed.cell(others).tolist()
        matches = None
        if manifest is not None:
            both = np.concatenate((bases, others))
            _, _, items = _place(stream, fed.position(both), fed.claimed_item(both))
            matches = _matches(fed.fingerprint(both), items, manifest).tolist()
        groups: dict[tuple[StepKey, StepKey], list[tuple[int, int, int, int, int]]] = defaultdict(
            list
        )
        for i, p in enumerate(conflicted):
            a, b = fed.keys[base_key[i]], fed.keys[other_key[i]]
            groups[(a, b)].append((p, base_cell[i], other_cell[i], i, len(pairs) + i))
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


def _saved(states: list[LoaderStateRecord]) -> dict[tuple[int, int], LoaderStateRecord]:
    """The loader states saved with checkpoints, by (incarnation, iteration)."""
    return {(s.incarnation, s.iteration): s for s in states if s.when == "saved"}


_INCREMENTAL = (
    "incremental verification: the loaded steps only (repeats of a content before them are "
    "checked by a full ft-verify, and by a follower against its ledger of the committed "
    "samples; a saved loader's position where the window, or a follower's ledger, holds "
    "the committed stream)"
)
_NO_MANIFEST = (
    "no dataset manifest: checked that every cell, attempt and incarnation fed the same "
    "content for a sample index, not that it is the dataset's item"
)


def _groups(fed: FedSamples, samples: np.ndarray) -> dict[tuple[int, int], list[int]]:
    """``samples`` (ascending) by the attempt and cell that fed them, in step order; each
    group lists indices into ``samples``."""
    groups: dict[tuple[int, int], list[int]] = defaultdict(list)
    keys, cells = fed.key(samples).tolist(), fed.cell(samples).tolist()
    for i, (key, cell) in enumerate(zip(keys, cells, strict=True)):
        groups[(key, cell)].append(i)
    return dict(sorted(groups.items(), key=lambda kv: fed.keys[kv[0][0]][1:] + kv[0]))


@dataclass(frozen=True)
class _Samples:
    """Chosen samples' positions, attempts (indices into :attr:`keys`), cells and items,
    spelled out: those of the loaded rows, and for a follower those of its ledger."""

    position: np.ndarray
    key: np.ndarray
    cell: np.ndarray
    items: np.ndarray
    keys: tuple[StepKey, ...]

    def key_text(self, ctx: RunContext, key: int) -> str:
        # every sample looked at is committed; a ledger's attempt may lie before the
        # window's history
        return ctx.describe_key(self.keys[key], default="committed")


@dataclass(frozen=True)
class _Window:
    """A follower's poll: the loaded committed samples of the steps its ledger does
    not hold (:attr:`rows`, ascending, and their :class:`Contents`), and the ledger of
    those before them."""

    rows: np.ndarray
    contents: Contents
    ledger: ContentLedger


@dataclass(frozen=True)
class _Judged:
    """What one pass over the fed samples found; the rest of the rule looks only at the
    samples named here (or at the runs), so no per-sample array but ``mask`` outlives
    the pass."""

    committed: int
    """Fed samples of committed attempts."""
    wrong: np.ndarray
    """Committed samples (ascending) whose content is not their item's, by the manifest."""
    claims: np.ndarray
    """Committed samples (ascending) whose loader read another item than the declared."""
    mask: np.ndarray
    """Per sample: committed, not ``wrong``, in a known epoch (FT008 looks for repeats
    among these)."""
    mask_keys: np.ndarray
    """Per attempt (over ``FedSamples.keys``): whether any sample of ``mask`` is its."""


def _judge(
    fed: FedSamples,
    stream: StreamMap,
    committed_key: np.ndarray,
    manifest: DatasetManifest | None,
) -> _Judged:
    """Each sample against its item, a chunk of samples at a time."""
    mask = np.zeros(len(fed), dtype=bool)
    mask_keys = np.zeros(len(fed.keys), dtype=bool)
    wrong: list[np.ndarray] = [np.empty(0, dtype=np.int64)]
    claims: list[np.ndarray] = [np.empty(0, dtype=np.int64)]
    committed_n = 0
    for chunk in fed.chunks():
        # per run, not per sample: a run's samples share their attempt
        run_committed = committed_key[chunk.run_key]
        committed = np.repeat(run_committed, chunk.run_count)
        committed_n += int(chunk.run_count[run_committed].sum())
        epochs, declared, items = _place(stream, chunk.position, chunk.claimed_item)
        ok = committed & (epochs != UNKNOWN)
        if manifest is not None:
            bad = committed & (items != UNKNOWN) & ~_matches(chunk.fingerprint, items, manifest)
            wrong.append(np.flatnonzero(bad) + chunk.lo)
            ok &= ~bad
        if stream.declared:
            claimed = chunk.claimed_item
            other = committed & (claimed != UNKNOWN) & (declared != UNKNOWN)
            other &= claimed != declared
            claims.append(np.flatnonzero(other) + chunk.lo)
        mask[chunk.rows] = ok
        mask_keys[chunk.run_key[chunk.any_per_run(ok)]] = True
    return _Judged(committed_n, np.concatenate(wrong), np.concatenate(claims), mask, mask_keys)


def _fed_as_allocated(
    fed: FedSamples, index: dict[StepKey, int], allocations: dict[StepKey, list[IntRuns]]
) -> set[StepKey]:
    """The attempts of ``allocations`` whose fed positions are exactly their allocated
    ones (as sets), found without a numpy call per attempt; an empty set where the
    positions span too wide a range to number them all in int64."""
    keys = list(allocations)
    group = np.full(len(fed.keys), -1, dtype=np.int64)
    for g, key in enumerate(keys):
        if key in index:
            group[index[key]] = g
    runs = fed.runs
    fed_group = group[runs.key] if runs.key.size else np.empty(0, dtype=np.int64)
    chosen = fed_group >= 0
    starts: list[int] = []
    lengths: list[int] = []
    groups: list[int] = []
    for g, parts in enumerate(allocations.values()):
        for p in parts:
            starts += p.starts
            lengths += p.lengths
            groups += [g] * len(p.starts)
    start = runs.start[chosen]
    fed_spans = grouped_spans(fed_group[chosen], start, start + runs.length[chosen])
    start = np.asarray(starts, dtype=np.int64)
    allocated = grouped_spans(
        np.asarray(groups, dtype=np.int64), start, start + np.asarray(lengths, dtype=np.int64)
    )
    if fed_spans is None or allocated is None:
        return set()
    n = len(keys)
    a_count = np.bincount(allocated[0], minlength=n)
    f_count = np.bincount(fed_spans[0], minlength=n)
    same = a_count == f_count
    # where both list as many spans, they line up one to one
    a_in, f_in = same[allocated[0]], same[fed_spans[0]]
    differ = (allocated[1][a_in] != fed_spans[1][f_in]) | (allocated[2][a_in] != fed_spans[2][f_in])
    same[allocated[0][a_in][differ]] = False
    return {keys[g] for g in np.flatnonzero(same).tolist()}


def _place(
    stream: StreamMap, positions: np.ndarray, claimed: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per sample: its epoch, the declared order's item, and its item (the declared one,
    else the loader's own claim where no order is declared)."""
    epochs, declared = stream.locate(positions)
    by_claim = (declared == UNKNOWN) & (claimed != UNKNOWN)
    items = np.where(by_claim, claimed, declared) if by_claim.any() else declared
    return epochs, declared, items


def _matches(fingerprint: np.ndarray, items: np.ndarray, manifest: DatasetManifest) -> np.ndarray:
    """Per sample: its item is one of the manifest's and it fed that item's fingerprint."""
    last = manifest.size - 1
    known = (items >= 0) & (items <= last)
    expected = manifest.fingerprints[np.clip(items, 0, max(last, 0))] if last >= 0 else items
    return known & (fingerprint == expected)


def _duplicate_candidates(
    fed: FedSamples, judged: _Judged, stream: StreamMap, manifest: DatasetManifest | None
) -> np.ndarray:
    """The samples of ``judged.mask`` (ascending) that may share an (epoch, content) group
    with another: every member of each such group, so the groups judged are whole.

    Sorting every committed sample by four keys cost most of FT008's time and memory.
    Without a manifest, any group of two or more may be a finding: the samples whose
    (epoch, fingerprint) hash occurs twice are kept (a hash collision only adds whole
    groups). With one, only a group holding one position fed by two cells is (a
    content at two positions matched its own item each): the contents fed at positions
    that two committed runs fed, and every sample of those contents.
    """
    mask = judged.mask
    if manifest is None:
        # the hashes of every candidate, sorted in place: the repeated ones, then a
        # second pass for the samples that hold them
        hashes = np.empty(int(mask.sum()), dtype=np.uint64)
        at = 0
        for chunk in fed.chunks():
            mixed = _mixed(chunk, stream, mask[chunk.rows])
            hashes[at : at + mixed.size] = mixed
            at += mixed.size
        hashes.sort()
        again = np.unique(hashes[1:][hashes[1:] == hashes[:-1]])
        del hashes
        if again.size == 0:
            return np.empty(0, dtype=np.int64)
        found = [np.empty(0, dtype=np.int64)]
        for chunk in fed.chunks():
            kept = mask[chunk.rows]
            rows = np.flatnonzero(kept) + chunk.lo
            found.append(rows[in_sorted(_mixed(chunk, stream, kept), again)])
        return np.concatenate(found)
    contents = unique_sorted(
        np.concatenate(
            [np.empty(0, dtype=np.int64)]
            + [unique_sorted(fp[mask[twice]]) for twice, _, fp in fed.fed_twice(judged.mask_keys)]
        )
    )
    if not contents.size:
        return np.empty(0, dtype=np.int64)
    found = [np.empty(0, dtype=np.int64)]
    for chunk in fed.chunks():
        hit = mask[chunk.rows] & in_sorted(chunk.fingerprint, contents)
        found.append(np.flatnonzero(hit) + chunk.lo)
    return np.concatenate(found)


def _mixed(chunk: FedChunk, stream: StreamMap, kept: np.ndarray) -> np.ndarray:
    """The (epoch, fingerprint) hash of the chunk's samples where ``kept``."""
    epochs, _ = stream.locate(chunk.position[kept])
    return mix(epochs, chunk.fingerprint[kept])


def _contents(fed: FedSamples, rows: np.ndarray, stream: StreamMap) -> Contents:
    """The fed samples ``rows`` as FT008 compares them."""
    at = fed.spelled(rows)
    epoch, _, items = _place(stream, at.position, at.claimed_item)
    triples = _key_columns(fed)[at.key]
    return Contents(
        mix(epoch, at.fingerprint),
        epoch,
        at.fingerprint,
        at.position,
        items,
        at.cell.astype(np.int64),
        triples[:, 0],
        triples[:, 1],
        triples[:, 2],
    )


def _key_columns(fed: FedSamples) -> np.ndarray:
    """Each attempt of :attr:`FedSamples.keys` as a row of incarnation, step and attempt
    (:data:`NO_ATTEMPT` where it has none)."""
    rows = [(i, s, NO_ATTEMPT if a is None else a) for i, s, a in fed.keys]
    return np.asarray(rows or [(0, 0, 0)], dtype=np.int64)


def _ledger_rows(fed: FedSamples, edge: int) -> np.ndarray:
    """Per sample: whether a follower's ledger takes it in. Those of steps from ``edge``
    on (it holds the earlier ones, which a window may hold again), each position an
    attempt's cell fed once (the ranks of one cell log the same rows)."""
    runs = fed.runs
    taken = _key_columns(fed)[runs.key, 1] >= edge
    if runs.key.size > 1:
        order = np.lexsort((runs.first, runs.length, runs.start, runs.cell, runs.key))
        columns = (runs.key[order], runs.cell[order], runs.start[order], runs.length[order])
        again = np.zeros(order.size, dtype=bool)
        again[1:] = np.all([c[1:] == c[:-1] for c in columns], axis=0)
        taken[order[again]] = False
    return np.repeat(taken, runs.length)


def _committed_before(
    ctx: RunContext,
    stream: StreamMap,
    manifest: DatasetManifest | None,
    window: Contents,
    floor: int,
) -> Contents:
    """The committed samples of epochs from ``floor`` on at the steps before the window's
    (``since - 1``), read from the log once: a follower's ledger that did not see them
    (a late attach; a resume back into an epoch it dropped). The steps are read back from
    the window, twice as many each time, until they reach an earlier epoch (or step 0):
    about the epoch's steps, judged from the window's samples per step."""
    edge = ctx.since - 1
    size = stream.dataset_size
    if size is None and floor in stream.reference:
        size = int(stream.reference[floor].items.size)
    steps = int(window.step.max()) - int(window.step.min()) + 1
    per_step = max((int(window.position.max()) - int(window.position.min()) + 1) // steps, 1)
    back = max(2 * -(-(size or 0) // per_step), 2 * steps, 8)
    while True:
        first = max(edge - back, 0)
        earlier = _committed_from_log(ctx, stream, manifest, first, edge)
        if first == 0 or (len(earlier) and int(earlier.epoch.min()) < floor):
            return earlier.take(earlier.epoch >= floor)
        back *= 2


def _committed_from_log(
    ctx: RunContext, stream: StreamMap, manifest: DatasetManifest | None, first: int, edge: int
) -> Contents:
    """The committed samples of steps ``first .. edge - 1`` as a ledger keeps them, from
    the segments an incremental verification of steps ``>= first`` reads."""
    from ftaudit.eventlog.rundir import SegmentListing
    from ftaudit.verifier.incremental import select
    from ftaudit.verifier.session import Session

    footers = ctx.footers
    assert footers is not None and footers.listing is not None  # a follower's poll
    listing = footers.listing
    live = SegmentListing(listing.run_dir, listing.writers, ())
    # the follower's footers: the declaring segments before the window are known there
    # (a fresh cache read 5,000 footers at step 99,000 to find them again)
    scan, scope = select(listing.run_dir, first, listing=live, cache=footers)
    session = Session.open(listing.run_dir, scan=scan, kept=scope.kept)
    try:
        loaded = RunContext(session, scope)
        fed = load_fed(loaded)
        if not len(fed):
            return _contents(fed, np.empty(0, dtype=np.int64), stream)
        committed_key = np.asarray([k in loaded.committed_keys for k in fed.keys], dtype=bool)
        judged = _judge(fed, stream, committed_key, manifest)
        rows = np.flatnonzero(judged.mask & _ledger_rows(fed, first))
        samples = _contents(fed, rows, stream)
    finally:
        session.close()
    return samples.take(samples.step < edge)


def _keys(samples: Contents) -> tuple[tuple[StepKey, ...], np.ndarray]:
    """The attempts ``samples`` name, ascending as the fed rows are numbered, and each
    sample's index into them."""
    inc, step, attempt = samples.incarnation, samples.step, samples.attempt
    order = np.lexsort((attempt, step, inc))
    columns = (inc[order], step[order], attempt[order])
    new = np.ones(order.size, dtype=bool)
    new[1:] = np.any([c[1:] != c[:-1] for c in columns], axis=0)
    key = np.empty(order.size, dtype=np.int64)
    key[order] = np.cumsum(new) - 1
    keys = tuple(
        (int(i), int(s), None if a == NO_ATTEMPT else int(a))
        for i, s, a in zip(*(c[new].tolist() for c in columns), strict=True)
    )
    return keys, key


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
