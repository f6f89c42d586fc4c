"""harness_store's spend bookkeeping (revision `hs3`): which groups of provider calls changed,
and what each group cost under each price table a caller asked with.

Upstream prices every call on its own (a caller-given table, tiers on the prompt, rounding per
call), so no price-free sum of tokens gives the cost back exactly. Instead, triggers on
`provider_calls` bump a counter per (day, model) and per run on every insert, delete or usage
update, whoever writes (io-harness's own code included); a priced answer is kept per group with
the counter it was computed at, and only groups whose counter moved are priced again from the
calls. The tables live in their own `MetaData`, outside the models' (so `copy`, sync and the
shape checks never treat them as io-harness tables; `detect.IGNORED_TABLES` names them).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Column, MetaData, Table, Text

from ..records.accounting import USAGE_SUMS as USAGE_SUMS

SPEND_METADATA = MetaData()


def _priced(*key: Column[Any]) -> tuple[Column[Any], ...]:
    return (
        Column("prices", Text, primary_key=True),
        *key,
        Column("changes", BigInteger, nullable=False),
        Column("calls", BigInteger, nullable=False),
        *(Column(name, BigInteger, nullable=False) for name in USAGE_SUMS),
        Column("cost_micros", BigInteger, nullable=False),
        Column("unpriced_calls", BigInteger, nullable=False),
    )


SPEND_DAYS = Table(
    "hs_spend_days",
    SPEND_METADATA,
    Column("day", Text, primary_key=True),
    Column("model", Text, primary_key=True),
    Column("changes", BigInteger, nullable=False),
)
"""Per (UTC day, model key): how many times a call of that group was written, deleted or had
its usage changed (only ever grows)."""

SPEND_RUNS = Table(
    "hs_spend_runs",
    SPEND_METADATA,
    Column("run_id", BigInteger, primary_key=True, autoincrement=False),
    Column("changes", BigInteger, nullable=False),
)
"""Per run: the same counter."""

PRICED_DAYS = Table(
    "hs_spend_priced_days",
    SPEND_METADATA,
    *_priced(Column("day", Text, primary_key=True), Column("model", Text, primary_key=True)),
)
"""A (day, model) group's `Spend` under one price table (`prices`: the table's fingerprint),
valid while `hs_spend_days.changes` still equals `changes`."""

PRICED_RUNS = Table(
    "hs_spend_priced_runs",
    SPEND_METADATA,
    *_priced(Column("run_id", BigInteger, primary_key=True, autoincrement=False)),
)
"""A run's `Spend` under one price table, valid while `hs_spend_runs.changes` still matches."""

SPEND_TABLES: tuple[str, ...] = tuple(SPEND_METADATA.tables)
"""The names of the tables above."""

RUN_SPEND_TABLES: tuple[Table, ...] = (SPEND_RUNS, PRICED_RUNS)
"""The spend tables keyed to a run: deleted with their runs (after `provider_calls`, whose
delete triggers bump them) by every path that deletes runs — prune, session deletion, sync."""

SPEND_AT_INDEX = ("hs_provider_calls_at", "provider_calls", ["at"])
"""The index that finds one day's calls (a group to price again, a `since` window's first,
partial day)."""
