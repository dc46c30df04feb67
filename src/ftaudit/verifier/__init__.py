"""The offline verifier: committed history, the rules of SPEC §6, the report (no torch).

Entry point: :func:`verify`. Rules live one per module in :mod:`ftaudit.verifier.rules`,
listed in :data:`ftaudit.verifier.rules.RULES`.
"""

from ftaudit.verifier.engine import UnknownRuleError, select_rules, verify
from ftaudit.verifier.findings import Location, Report, RuleResult, Severity, Violation
from ftaudit.verifier.views import create_history_views

__all__ = [
    "Location",
    "Report",
    "RuleResult",
    "Severity",
    "UnknownRuleError",
    "Violation",
    "create_history_views",
    "select_rules",
    "verify",
]
