"""FT012 parameter-manifest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ftaudit.verifier.context import RunContext
from ftaudit.verifier.findings import Violation
from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.rules.rank_rows import RankRow, judged_rank_rows

MANIFESTS = """
    SELECT incarnation, step, coalesce(source_role, '') AS role, cell, rank, segment, seq,
           digest, names, shapes, dtypes, requires_grad, groups, declared_change
    FROM parameter_manifest
    ORDER BY role, rank, incarnation, step NULLS FIRST, cell, seq"""


@dataclass(frozen=True)
class _Manifest:
    at: RankRow
    digest: str
    entries: dict[str, tuple[object, ...]]
    declared: str

    @classmethod
    def of(cls, r: RankRow) -> _Manifest:
        entries = {
            name: (tuple(shape), dtype, grad, group)
            for name, shape, dtype, grad, group in zip(
                r["names"], r["shapes"], r["dtypes"], r["requires_grad"], r["groups"], strict=True
            )
        }
        return cls(r, r["digest"], entries, r["declared_change"] or "")


class ParameterManifest(Rule):
    """What is trained does not change across resumes, heals and cells unless declared.

    Every trainer rank logs its trainable-parameter manifest (name, shape, dtype,
    ``requires_grad``, optimizer param group of each parameter) when it starts training
    and whenever it changes. For each role and rank index, every manifest of the run,
    in every cell and incarnation, equals the one before it, unless it declares the
    change (``declared_change``). The witness cannot see this class: a head frozen
    after a resume still passes gradient to the witness rows, so every sample reads as
    trained while part of the model no longer learns.

    Fails::

        incarnation 0: parameter_manifest cell 0 rank 0 {head.weight: requires_grad}
        incarnation 1: parameter_manifest cell 0 rank 0 {head.weight: frozen}
        -> FT012: head.weight stopped being trained at the resume

    Passes::

        incarnation 1: parameter_manifest ... {head.weight: frozen},
                       declared_change "freeze the head for the last epoch"
    """

    code = "FT012"
    name = "parameter-manifest"
    kinds: ClassVar[dict[str, str]] = {
        "parameters_changed": "the trainable-parameter manifest changed without a declaration",
    }

    def check(self, ctx: RunContext) -> RuleOutcome:
        # every manifest, also before an incremental window: the first judged one is
        # compared with the one before it
        rows = judged_rank_rows(
            ctx, MANIFESTS, label="FT012 manifests", in_window=False, needs=("parameter_manifest",)
        )
        groups: dict[tuple[str, int], list[_Manifest]] = {}
        for r in rows:
            groups.setdefault((r.who.role, r.who.rank), []).append(_Manifest.of(r))
        out: list[Violation] = []
        for manifests in groups.values():
            current = manifests[0]
            reported: set[tuple[int, int, str]] = set()
            for m in manifests[1:]:
                if m.digest == current.digest:
                    continue
                if m.declared:
                    current = m
                    continue
                key = (m.at.incarnation, m.at.who.cell, m.digest)
                if key not in reported and (m.at.step is None or m.at.step >= ctx.since):
                    reported.add(key)
                    out.append(self._changed(current, m))
        return RuleOutcome(len(rows), tuple(out))

    def _changed(self, before: _Manifest, after: _Manifest) -> Violation:
        return self.violation(
            f"the trainable parameters of {after.at.who} in incarnation {after.at.incarnation} "
            f"(step {after.at.step}) differ from those of cell {before.at.who.cell} in "
            f"incarnation {before.at.incarnation} (step {before.at.step}), undeclared: "
            f"{_differences(before, after)}; part of the model is trained differently "
            "after a resume or heal, which the witness cannot see",
            kind="parameters_changed",
            location=after.at.location(),
        )


def _differences(before: _Manifest, after: _Manifest, limit: int = 4) -> str:
    parts: list[str] = []
    for name in sorted(before.entries.keys() - after.entries.keys()):
        parts.append(f"{name} removed")
    for name in sorted(after.entries.keys() - before.entries.keys()):
        parts.append(f"{name} added")
    for name in sorted(before.entries.keys() & after.entries.keys()):
        (shape0, dtype0, grad0, group0), (shape1, dtype1, grad1, group1) = (
            before.entries[name],
            after.entries[name],
        )
        if grad0 != grad1:
            parts.append(f"{name} {'frozen' if grad0 else 'unfrozen'}")
        if shape0 != shape1:
            parts.append(f"{name} shape {list(shape0)} -> {list(shape1)}")
        if dtype0 != dtype1:
            parts.append(f"{name} dtype {dtype0} -> {dtype1}")
        if group0 != group1:
            parts.append(f"{name} param group {group0} -> {group1}")
    more = f", ... {len(parts) - limit} more" if len(parts) > limit else ""
    return ", ".join(parts[:limit]) + more if parts else "the parameter order changed"
