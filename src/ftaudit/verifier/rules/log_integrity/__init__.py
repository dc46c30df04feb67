"""FT001's checks (:mod:`ftaudit.verifier.rules.ft001_log_integrity`), one module per
kind of evidence: sequence numbers, the hash chain, the run's identity, how it ended,
MACs and resume points. Each check takes the rule (whose ``violation`` declares the
kinds) and returns its violations; files are read through :mod:`ftaudit.eventlog`.
"""
