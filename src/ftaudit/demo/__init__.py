"""A real small fault-tolerant training, used by ``ftaudit demo`` to prove the product end to end.

Cells are Ray actors training a tiny torch transformer; the driver retries and accepts
attempts with the miles policy of the trainer hooks, checkpoints, heals and is itself
killed and restarted; then the verifier judges the run directory. Everything heavy
(torch, Ray) is imported only by the modules that need it, never by this package.
"""
