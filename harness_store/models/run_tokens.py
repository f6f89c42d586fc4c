"""harness_store's per-run token total (revision `hs6`): what the Store's step door reads to
refuse a step whose tokens would take its run's total past 2⁶³−1, in one index probe however
many steps the run has.

Triggers on `steps` keep it, whoever writes (io-harness's own code included): each insert adds
a step's tokens, each delete takes them off, an update does both, and a run left with no step
loses its row. A total that would pass 2⁶³−1, or a step whose tokens are no integer of at least
0 (a foreign writer's), makes it NULL: unknown, and the door then sums the run's steps itself.
Like hs3's counters, the table lives in its own `MetaData`, outside the models' (`copy`, sync
and the shape checks never treat it as an io-harness table; `detect.IGNORED_TABLES` names it).
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, MetaData, Table

RUN_TOKENS_METADATA = MetaData()

RUN_TOKENS = Table(
    "hs_run_tokens",
    RUN_TOKENS_METADATA,
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("total", BigInteger, nullable=True),
)
"""Per run with steps: the sum of their tokens, or NULL when it is unknown (see the module)."""

RUN_CALL_TOKENS = Table(
    "hs_run_call_tokens",
    RUN_TOKENS_METADATA,
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("total", BigInteger, nullable=True),
)
"""Revision `hs7`, the same for provider calls: per run with calls, the sum of their
`total_tokens` (NULL usage adds nothing), or NULL when it is unknown; what the Store's
provider-call door reads. A run without a row has no call yet (or lost it: the door then sums
the run's calls)."""
