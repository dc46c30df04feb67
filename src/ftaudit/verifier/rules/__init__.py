"""The rule registry: every rule of SPEC §6, one module each, in code order.

Codes are stable and never reused: a retired rule keeps its number out of circulation.
"""

from __future__ import annotations

from ftaudit.verifier.rules.base import Rule, RuleOutcome
from ftaudit.verifier.rules.ft001_log_integrity import LogIntegrity
from ftaudit.verifier.rules.ft002_step_continuity import StepContinuity
from ftaudit.verifier.rules.ft003_allocator_replay import AllocatorReplay
from ftaudit.verifier.rules.ft004_witness_exactly_once import WitnessExactlyOnce
from ftaudit.verifier.rules.ft005_sample_exactly_once import SampleExactlyOnce
from ftaudit.verifier.rules.ft006_checksums import Checksums
from ftaudit.verifier.rules.ft007_engine_checksums import EngineChecksums
from ftaudit.verifier.rules.ft008_data_identity import DataIdentity
from ftaudit.verifier.rules.ft009_restore_evidence import RestoreEvidence
from ftaudit.verifier.rules.ft010_checkpoint_state import CheckpointState
from ftaudit.verifier.rules.ft011_application_count import ApplicationCount
from ftaudit.verifier.rules.ft012_parameter_manifest import ParameterManifest

RULES: tuple[Rule, ...] = (
    LogIntegrity(),
    StepContinuity(),
    AllocatorReplay(),
    WitnessExactlyOnce(),
    SampleExactlyOnce(),
    Checksums(),
    EngineChecksums(),
    DataIdentity(),
    RestoreEvidence(),
    CheckpointState(),
    ApplicationCount(),
    ParameterManifest(),
)

__all__ = ["RULES", "Rule", "RuleOutcome"]
