"""The built-in event types' stored layouts (``eventlog/shapes.py``), generated from the
models of ``events.py`` and ``identity.py`` by ``python -m ftaudit.eventlog.describe``.

Do not edit: regenerate. ``tests/eventlog/test_builtin_layouts.py`` fails while this
differs from the models.
"""

BUILTIN_LAYOUTS = (
    (
        "run_started",
        "ftaudit.eventlog.events.RunStarted",
        (
            (
                "resumed_from",
                (
                    "struct",
                    "ftaudit.eventlog.events.CheckpointRef",
                    (("iteration", "int"), ("incarnation", "int")),
                ),
                False,
            ),
            ("buffer_size", "int", True),
            ("config_json", "str", False),
            ("dataset_size", "int", False),
            ("deterministic_order", "bool", False),
            ("status", ("enum", "RunStatus", ("running", "completed", "failed", "killed")), False),
        ),
    ),
    (
        "run_finished",
        "ftaudit.eventlog.events.RunFinished",
        (
            ("status", ("enum", "RunStatus", ("running", "completed", "failed", "killed")), False),
            (
                "final_heads",
                (
                    "map",
                    "str",
                    (
                        "struct",
                        "ftaudit.eventlog.events.WriterHead",
                        (("last_seq", "int"), ("digest", "str")),
                    ),
                ),
                False,
            ),
            ("mac", "str", False),
        ),
    ),
    (
        "witness_allocated",
        "ftaudit.eventlog.events.WitnessAllocated",
        (
            ("num_ids", "int", True),
            ("counter_after", "int", True),
            (
                "witness_ids",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
            (
                "sample_indices",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
            (
                "stale_ids",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
        ),
    ),
    (
        "witness_snapshot",
        "ftaudit.eventlog.events.WitnessSnapshot",
        (
            ("cell", "int", True),
            ("instance", "str", True),
            (
                "nonzero_ids",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
            (
                "stale_ids",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
        ),
    ),
    (
        "witness_cleared",
        "ftaudit.eventlog.events.WitnessCleared",
        (
            ("cell", "int", True),
            (
                "stale_ids",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
        ),
    ),
    (
        "sample_advantage_summary",
        "ftaudit.eventlog.events.SampleAdvantageSummary",
        (
            ("cell", "int", True),
            ("witness_ids", ("list", "int"), True),
            ("token_counts", ("list", "int"), True),
            ("all_zero", ("list", "bool"), True),
            ("pure_advantage_loss", "bool", False),
        ),
    ),
    (
        "step_end",
        "ftaudit.eventlog.events.StepEnd",
        (
            ("accepted_attempt", "int", True),
            (
                "cells",
                (
                    "map",
                    "int",
                    (
                        "struct",
                        "ftaudit.eventlog.events.CellOutcome",
                        (
                            ("errored", "bool"),
                            (
                                "ranks",
                                (
                                    "list",
                                    ("enum", "RankOutcome", ("normal", "discarded_should_retry")),
                                ),
                            ),
                        ),
                    ),
                ),
                True,
            ),
        ),
    ),
    (
        "attempt_end",
        "ftaudit.eventlog.events.AttemptEnd",
        (
            ("accepted", "bool", True),
            (
                "cells",
                (
                    "map",
                    "int",
                    (
                        "struct",
                        "ftaudit.eventlog.events.CellOutcome",
                        (
                            ("errored", "bool"),
                            (
                                "ranks",
                                (
                                    "list",
                                    ("enum", "RankOutcome", ("normal", "discarded_should_retry")),
                                ),
                            ),
                        ),
                    ),
                ),
                True,
            ),
        ),
    ),
    (
        "cell_reconfigured",
        "ftaudit.eventlog.events.CellReconfigured",
        (
            ("quorum_id", "int", True),
            ("heal_source", "int", False),
            ("healed_cells", ("list", "int"), False),
            ("alive_cells", ("list", "int"), False),
        ),
    ),
    (
        "torchft_quorum",
        "ftaudit.eventlog.events.TorchftQuorum",
        (
            ("quorum_id", "int", True),
            ("torchft_step", "int", True),
            ("replica_id", "str", False),
            ("group_rank", "int", False),
        ),
    ),
    (
        "torchft_commit",
        "ftaudit.eventlog.events.TorchftCommit",
        (
            ("quorum_id", "int", True),
            ("torchft_step", "int", True),
            ("commit_result", "bool", True),
            ("replica_id", "str", False),
            ("group_rank", "int", False),
        ),
    ),
    (
        "checkpoint_saved",
        "ftaudit.eventlog.events.CheckpointSaved",
        (
            ("iteration", "int", True),
            ("path", "str", False),
            ("writers", ("map", "str", "int"), False),
            ("complete", "bool", False),
            ("chain_heads", ("map", "str", "str"), False),
            (
                "job_heads",
                (
                    "map",
                    "str",
                    (
                        "struct",
                        "ftaudit.eventlog.events.WriterHead",
                        (("last_seq", "int"), ("digest", "str")),
                    ),
                ),
                False,
            ),
            ("mac", "str", False),
        ),
    ),
    (
        "trainer_weight_checksum",
        "ftaudit.eventlog.events.TrainerWeightChecksum",
        (
            (
                "when",
                ("enum", "ChecksumWhen", ("after_step", "at_save", "after_load", "after_heal")),
                True,
            ),
            ("cell", "int", True),
            ("rank", "int", True),
            ("hashes", ("map", "str", "str"), True),
            (
                "checkpoint",
                (
                    "struct",
                    "ftaudit.eventlog.events.CheckpointRef",
                    (("iteration", "int"), ("incarnation", "int")),
                ),
                False,
            ),
            ("heal_source", "int", False),
            ("replica_local", ("list", "str"), False),
        ),
    ),
    (
        "engine_weight_checksum",
        "ftaudit.eventlog.events.EngineWeightChecksum",
        (("engines", ("map", "int", ("map", "str", "str")), True),),
    ),
    ("metric", "ftaudit.eventlog.events.Metric", (("values", ("map", "str", "float"), True),)),
    (
        "fault_injected",
        "ftaudit.eventlog.events.FaultInjected",
        (
            ("mode", ("enum", "FaultMode", ("sigkill", "exit", "segfault", "hang")), True),
            ("target", "str", True),
            ("cell", "int", False),
            ("rank", "int", False),
        ),
    ),
    (
        "sample_fingerprints",
        "ftaudit.eventlog.events.SampleFingerprints",
        (
            ("cell", "int", True),
            (
                "sample_indices",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
            ("fingerprints", ("list", "int"), True),
            ("items", ("list", "int"), False),
        ),
    ),
    (
        "data_order",
        "ftaudit.eventlog.events.DataOrder",
        (
            ("epoch", "int", True),
            ("start", "int", True),
            ("items", ("list", "int"), True),
            ("dataset_size", "int", True),
            ("seed", "int", False),
            ("shuffle", "bool", False),
            ("sampler", "str", False),
        ),
    ),
    (
        "data_manifest",
        "ftaudit.eventlog.events.DataManifest",
        (
            ("digest", "str", True),
            ("dataset_size", "int", True),
            ("algorithm", "str", True),
            ("path", "str", False),
        ),
    ),
    (
        "loader_state",
        "ftaudit.eventlog.events.LoaderState",
        (
            ("iteration", "int", True),
            ("when", ("enum", "LoaderWhen", ("saved", "resumed")), True),
            ("position", "int", True),
            ("epoch", "int", True),
            ("seed", "int", False),
            ("state_json", "str", False),
        ),
    ),
    (
        "state_adopted",
        "ftaudit.eventlog.events.StateAdopted",
        (
            ("cell", "int", True),
            ("rank", "int", True),
            ("reason", "str", True),
            (
                "checkpoint",
                (
                    "struct",
                    "ftaudit.eventlog.events.CheckpointRef",
                    (("iteration", "int"), ("incarnation", "int")),
                ),
                False,
            ),
            ("heal_source", "int", False),
        ),
    ),
    (
        "witness_gradient",
        "ftaudit.eventlog.events.WitnessGradient",
        (
            ("cell", "int", True),
            ("rank", "int", True),
            ("instance", "str", True),
            (
                "nonzero_ids",
                (
                    "struct",
                    "ftaudit.eventlog.intruns.IntRuns",
                    (("starts", ("list", "int")), ("lengths", ("list", "int"))),
                ),
                True,
            ),
        ),
    ),
    (
        "step_applied",
        "ftaudit.eventlog.events.StepApplied",
        (("cell", "int", True), ("rank", "int", True), ("counters", ("map", "str", "int"), False)),
    ),
    (
        "parameter_manifest",
        "ftaudit.eventlog.events.ParameterManifest",
        (
            ("cell", "int", True),
            ("rank", "int", True),
            ("digest", "str", True),
            ("names", ("list", "str"), True),
            ("shapes", ("list", ("list", "int")), True),
            ("dtypes", ("list", "str"), True),
            ("requires_grad", ("list", "bool"), True),
            ("groups", ("list", "int"), True),
            ("declared_change", "str", False),
        ),
    ),
)

WRITER_KINDS = ("driver", "rollout_manager", "trainer", "engine")

WRITER_ROLES = ("actor", "critic")
