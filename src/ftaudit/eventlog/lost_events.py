"""A writer's last-chance record (``eventlog/fallback.py`` says where it goes and why)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class LostEvents(BaseModel):
    """One writer's last word: how many of its events never reached the run directory."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    run_id: str
    run_dir: str
    writer: str
    logged: int
    """Events logged in all (the next sequence number)."""
    durable_seq: int
    """The last sequence number sealed in the run directory (-1: none)."""
    dropped: int
    """Events dropped (the buffer overflowed while the disk failed) that no sealed segment's
    footer tells: drops followed by a successful flush are in the run already."""
    unflushed: int
    """Events still buffered when the writer closed: never written."""
    write_errors: int

    @property
    def lost(self) -> int:
        return self.dropped + self.unflushed


__all__ = ["LostEvents"]
