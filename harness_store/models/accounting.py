"""What a run cost: every provider call with its usage and latency (io-harness 0.18)."""

from __future__ import annotations

from sqlalchemy import Index
from sqlalchemy.orm import Mapped

from .base import AUTOINCREMENT, Base, dated, rowid_key


class ProviderCall(Base):
    """One call to a model provider: attempt, model, token usage by kind, latency, finish
    reason or failure (0.18); indexed by run from 0.37, by `at` from harness_store's hs3."""

    __tablename__ = "provider_calls"
    __table_args__ = (
        Index("provider_calls_run", "run_id"),
        Index("hs_provider_calls_at", "at"),  # hs3
        AUTOINCREMENT,
    )

    id: Mapped[int] = rowid_key()
    run_id: Mapped[int]
    step: Mapped[int]
    attempt: Mapped[int]
    provider: Mapped[str]
    model: Mapped[str | None]
    prompt_tokens: Mapped[int | None]
    completion_tokens: Mapped[int | None]
    total_tokens: Mapped[int | None]
    cache_read_tokens: Mapped[int | None]
    cache_write_tokens: Mapped[int | None]
    reasoning_tokens: Mapped[int | None]
    server_tool_requests: Mapped[int | None]
    latency_ms: Mapped[int]
    ttft_ms: Mapped[int | None]
    finish_reason: Mapped[str | None]
    failure: Mapped[str | None]
    at: Mapped[str] = dated()
