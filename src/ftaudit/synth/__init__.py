"""Synthetic runs at scale: ``ftaudit synth`` writes them through the public event API.

Used to load-test the writer and the verifier (``benchmarks/verify_bench.py``) and to
plant one chosen defect for the rules to catch. Imports no torch.
"""

from ftaudit.synth.bugs import BUGS, SynthBug, get_bug
from ftaudit.synth.generate import SynthConfig, SynthResult, plan, synthesize
from ftaudit.synth.ring import RunRing

__all__ = [
    "BUGS",
    "RunRing",
    "SynthBug",
    "SynthConfig",
    "SynthResult",
    "get_bug",
    "plan",
    "synthesize",
]
