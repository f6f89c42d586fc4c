"""hs3's spend counters: every answer of `spend_by_model`, `spend_by_day` and `spend_by_run`
read through them equals the answer priced from every call (upstream's way) after any mix of
writes, updates and deletions, by harness_store or by io-harness itself, on both backends; a
`since` window that starts mid-day is exact; the revision goes down and up again cleanly."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from interop import oracles
from interop.debugform import debug
from interop.rustdebug import parse
from interop.test_run_api_oracle import PRICES as ZERO
from sqlalchemy import create_engine, delete, insert, inspect, text, update
from support.shared import SHARED

from harness_store import AsyncStore, Price, PriceTable, PriceTier, ProviderCall, Store, Usage
from harness_store.models import ProviderCall as CallRow
from harness_store.models import table_of
from harness_store.models.spend import SPEND_TABLES
from harness_store.releases import HEAD
from harness_store.schema import migrate
from harness_store.store.accounting import ROW_KEYS

CALLS = table_of(CallRow)
BYS = ("model", "day", "run")

PRICES = (
    PriceTable.new("2026-11-30")
    .with_("m-a", Price(input=1_250_001, output=3_000_007, cache_read=99_999, cache_write=7))
    .with_("m-b", Price(input=300_000, output=1_500_000, per_server_tool_request=10_000))
    .with_tiers("m-a", [PriceTier(400, Price(input=2_000_003, output=4_999_999))])
)
"""Rates that leave a remainder on nearly every call (rounded per call) and a tier on the
prompt; `m-c` has no price."""

OTHER = PriceTable.new("2026-12-01").with_("m-c", Price(input=777_777, output=1))


def url_of(target: str) -> str:
    return target if "://" in target else f"sqlite:///{target}"


def calls(rng: random.Random, runs: list[int], days: list[str], n: int) -> list[dict[str, Any]]:
    """`n` provider-call rows over the runs and days: some without usage, some without model."""
    rows = []
    for i in range(n):
        usage = rng.random() > 0.15
        prompt = rng.randint(0, 900)
        rows.append(
            {
                "run_id": rng.choice(runs),
                "step": i,
                "attempt": 1,
                "provider": "p",
                "model": rng.choice(["m-a", "m-b", "m-c", None]),
                "prompt_tokens": prompt if usage else None,
                "completion_tokens": rng.randint(0, 300) if usage else None,
                "total_tokens": prompt + 1 if usage else None,
                "cache_read_tokens": rng.randint(0, 500) if usage else None,
                "cache_write_tokens": rng.randint(0, 50) if usage else None,
                "reasoning_tokens": rng.choice([None, 3]) if usage else None,
                "server_tool_requests": rng.randint(0, 2) if usage else None,
                "latency_ms": 5,
                "at": f"{rng.choice(days)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00",
            }
        )
    return rows


def exact(store: Store, prices: PriceTable, by: str, since: str | None = None) -> Any:
    """Upstream's answer: every call read back, grouped and priced one by one."""
    return store._spend_exact(prices, ROW_KEYS[by], since)


def assert_all_exact(store: Store, since: str | None = None) -> None:
    for prices in (PRICES, OTHER):
        for by in BYS:
            want = exact(store, prices, by, since)
            assert getattr(store, f"spend_by_{by}")(prices, since=since) == want, (by, since)
            # a second time from what the first kept
            assert getattr(store, f"spend_by_{by}")(prices, since=since) == want, (by, since)


def kept_rows(target: str) -> int:
    engine = create_engine(url_of(target))
    try:
        with engine.connect() as conn:
            return int(conn.execute(text("SELECT count(*) FROM hs_spend_priced_days")).scalar())
    finally:
        engine.dispose()


@pytest.mark.slow_on("postgresql")
def test_counters_answer_exactly_after_writes_updates_and_deletions(store_target: str) -> None:
    rng = random.Random(15)
    days = ["2026-09-01", "2026-09-02", "2026-09-30", "2026-10-01"]
    with Store.open(store_target) as store:
        runs = [store.start_run(f"g{i}", "f") for i in range(6)]
        assert store._spend_counted()
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, runs, days, 300))
        assert_all_exact(store)
        assert kept_rows(store_target) > 0
        # the Store's own write, on today's clock
        store.record_provider_call(runs[0], ProviderCall(1, 1, "p", "m-a", Usage(500, 7, 507), 3))
        store.record_provider_call(runs[1], ProviderCall(1, 2, "p", None, None, 3))
        # a bulk write (sync's: COPY on PostgreSQL, one statement for many rows)
        with store.engine.begin() as conn:
            store.backend.bulk_insert(
                conn, CALLS, list(calls(rng, [0], [""], 1)[0]),
                [tuple(r.values()) for r in calls(rng, runs, days[:2], 50)],
            )  # fmt: skip
        assert_all_exact(store)
        # usage, model, day and run changed under a kept answer
        with store.engine.begin() as conn:
            conn.execute(update(CALLS).where(CALLS.c.id % 7 == 0).values(prompt_tokens=401))
            conn.execute(update(CALLS).where(CALLS.c.id % 11 == 0).values(model="m-b"))
            conn.execute(update(CALLS).where(CALLS.c.id % 13 == 0).values(at="2026-09-03 01:00"))
            conn.execute(update(CALLS).where(CALLS.c.id % 17 == 0).values(run_id=runs[5]))
            # 0.58's archive empties `failure`, which changes no spend
            conn.execute(update(CALLS).values(failure=""))
        assert_all_exact(store)
        # every call of one (day, model) group gone, and one run's
        with store.engine.begin() as conn:
            conn.execute(
                delete(CALLS).where(CALLS.c.at.like("2026-09-30%"), CALLS.c.model == "m-a")
            )
            conn.execute(delete(CALLS).where(CALLS.c.run_id == runs[2]))
        assert_all_exact(store)


@pytest.mark.slow_on("postgresql")
def test_retention_keeps_the_counters_right(store_target: str) -> None:
    rng = random.Random(58)
    with Store.open(store_target) as store:
        sessions, runs = [], []
        for i in range(4):
            session = store.create_session(f"/ws/{i}")
            run = store.start_run(f"turn {i}", "")
            store.finish_run(run, "success")
            store.record_turn(session, None, run, "prompt")
            sessions.append(session)
            runs.append(run)
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, runs, ["2026-09-01", "2026-09-02"], 200))
        assert_all_exact(store)
        store.archive_session(sessions[3])
        store.delete_session(sessions[0])
        assert_all_exact(store)
        assert store.spend_by_run(PRICES)[0].key != str(runs[0])
        store.sweep_sessions("9999")
        assert store.spend_by_model(PRICES) == [] == exact(store, PRICES, "model")
        assert_all_exact(store)


@pytest.mark.parametrize(
    "since",
    [
        "2026-09-02",  # a day boundary
        "2026-09-02 12",  # mid-day
        "2026-09-02 12:30:00",
        "2026-09-02T12:30:00.250Z",  # between two seconds
        "2026-09-30 23:59:59",
        "2026-09-30T23:59:59.500Z",  # rounds up to the next day
        "2026-09-02T17:30+05:00",  # an offset
        "2027-01-01",  # nothing after it
        "1970-01-01",  # everything
    ],
)
@pytest.mark.slow_on("postgresql")
def test_since_mid_day_is_exact(store_target: str, since: str) -> None:
    rng = random.Random(7)
    with Store.open(store_target) as store:
        runs = [store.start_run("g", "f") for _ in range(3)]
        days = ["2026-09-01", "2026-09-02", "2026-09-30", "2026-10-01"]
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, runs, days, 400))
        store.spend_by_model(PRICES)  # every whole day kept
        assert_all_exact(store, since)
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, runs, days[1:2], 40))
        assert_all_exact(store, since)


@pytest.mark.slow_on("postgresql")
def test_downgrade_drops_the_counters_and_upgrade_counts_again(store_target: str) -> None:
    rng = random.Random(3)
    days = ["2026-09-01", "2026-09-02"]
    with Store.open(store_target) as store:
        runs = [store.start_run("g", "f") for _ in range(3)]
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, runs, days, 100))
        assert_all_exact(store)
    migrate.downgrade(store_target, "hs2", backup=False)
    engine = create_engine(url_of(store_target))
    with engine.connect() as conn:
        assert not set(SPEND_TABLES) & set(inspect(conn).get_table_names())
        assert "hs_provider_calls_at" not in {
            i["name"] for i in inspect(conn).get_indexes("provider_calls")
        }
    with engine.begin() as conn:  # written with no trigger, as by a store not upgraded
        conn.execute(insert(CALLS), calls(rng, runs, days, 60))
        conn.execute(delete(CALLS).where(CALLS.c.id % 5 == 0))
    engine.dispose()
    with Store.open(store_target, read_only=True) as old:
        assert not old._spend_counted()
        assert_all_exact(old)  # the plain way, as before hs3
    report = migrate.upgrade(store_target, backup=False)
    assert (report.before, report.after) == ("hs2", HEAD)
    with Store.open(store_target) as store:
        assert store._spend_counted()
        assert_all_exact(store)


def test_a_read_only_store_answers_without_keeping(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("g", "f")
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(random.Random(1), [run], ["2026-09-01"], 50))
    with Store.open(path, read_only=True) as reader:
        assert_all_exact(reader)
    assert kept_rows(str(path)) == 0


@pytest.mark.slow_on("postgresql")
def test_an_async_store_keeps_its_answers(store_target: str) -> None:
    """AsyncStore reads spend on its read-only twin (SQLite), so that it never queues behind
    writes; the answers it priced are still kept, through the writable store, so the next ask
    (from any Store) does not price every call again."""
    with Store.open(store_target) as store:
        run = store.start_run("g", "f")
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(random.Random(3), [run], ["2026-09-01"], 40))
        want = {by: exact(store, PRICES, by) for by in BYS}

    async def ask() -> dict[str, Any]:
        async with await AsyncStore.open(store_target) as aio:
            return {by: await getattr(aio, f"spend_by_{by}")(PRICES) for by in BYS}

    assert asyncio.run(ask()) == want
    assert kept_rows(store_target) > 0
    engine = create_engine(url_of(store_target))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM hs_spend_priced_runs")).scalar() == 1
    engine.dispose()


@pytest.mark.slow_on("postgresql")
def test_a_read_only_store_answers_from_what_a_writable_one_kept(store_target: str) -> None:
    """A read-only Store (the CLI's) cannot keep answers, but it answers from those a writable
    one kept while their counters match: seen by marking the kept rows' cost, which a reader
    pricing the calls again would not answer; once a call moves the counters, it prices again."""
    one = calls(random.Random(2), [0], ["2026-09-01"], 2)
    with Store.open(store_target) as store:
        run = store.start_run("g", "f")
        for row in one:
            row.update(run_id=run, model="m-a", total_tokens=5)
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), one[:1])
        for by in BYS:
            getattr(store, f"spend_by_{by}")(PRICES)  # priced and kept
    engine = create_engine(url_of(store_target))
    with engine.begin() as conn:
        conn.execute(text("UPDATE hs_spend_priced_runs SET cost_micros = 424242"))
        conn.execute(text("UPDATE hs_spend_priced_days SET cost_micros = 434343"))
    with Store.open(store_target, read_only=True) as reader:
        assert [s.cost_micros for s in reader.spend_by_run(PRICES)] == [424242]
        assert [s.cost_micros for s in reader.spend_by_day(PRICES)] == [434343]
        assert [s.cost_micros for s in reader.spend_by_model(PRICES)] == [434343]
    with engine.begin() as conn:  # a second call of the same run, day and model
        conn.execute(insert(CALLS), one[1:])
    engine.dispose()
    with Store.open(store_target, read_only=True) as reader:
        for by in BYS:
            want = exact(reader, PRICES, by)
            assert getattr(reader, f"spend_by_{by}")(PRICES) == want, by
            assert 424242 not in [s.cost_micros for s in want]


@pytest.mark.slow_on("postgresql")
def test_runs_answer_in_text_order_kept_and_priced_again_alike(store_target: str) -> None:
    """Runs 1 to 12 answer keyed "1", "10", "11", "12", "2", … (upstream's text order), from
    kept answers, after some runs changed (priced again among kept ones) and after one run
    lost every call (no group)."""
    rng = random.Random(21)
    with Store.open(store_target) as store:
        runs = [store.start_run("g", "f") for _ in range(12)]
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, runs, ["2026-09-01"], 120))
        first = store.spend_by_run(PRICES)
        assert [s.key for s in first] == sorted(str(r) for r in runs)
        assert first == exact(store, PRICES, "run") == store.spend_by_run(PRICES)
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(rng, [runs[1], runs[10]], ["2026-09-02"], 5))
            conn.execute(delete(CALLS).where(CALLS.c.run_id == runs[4]))
        want = exact(store, PRICES, "run")
        assert str(runs[4]) not in [s.key for s in want]
        assert store.spend_by_run(PRICES) == want
        assert store.spend_by_run(PRICES) == want  # all kept now


def test_an_in_memory_store_counts_too() -> None:
    with Store.memory() as store:
        assert store._spend_counted()
        run = store.start_run("g", "f")
        for i in range(5):
            store.record_provider_call(run, ProviderCall(i, 1, "p", "m-a", Usage(i * 100, 3, 9), 1))
        assert_all_exact(store)


def oracle(command: str, path: Path) -> Any:
    """io-harness 0.66's own store code on a file (`interop.oracles`' binary), JSON out."""
    binary = oracles.binary(SHARED / "oracle", "0.66")
    done = subprocess.run(
        [str(binary), command, str(path)], check=True, capture_output=True, text=True, timeout=120
    )
    return json.loads(done.stdout) if done.stdout.strip() else None


def test_io_harness_writes_into_a_migrated_store_are_counted(tmp_path: Path) -> None:
    """io-harness 0.66 itself (the oracle's `write` script: provider calls, a deleted session)
    writes into a store at hs3 whose answers are kept: its calls are counted by the triggers,
    and upstream's own `spend_by_model`/`spend_by_day` on the store equal harness_store's."""
    path = tmp_path / "runs.sqlite3"
    with Store.open(path) as store:
        run = store.start_run("before", "f")
        day = "2026-12-01"
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), calls(random.Random(2), [run], [day], 30))
        assert_all_exact(store)
    oracle("write", path)
    conn = sqlite3.connect(path)
    try:
        written = conn.execute("SELECT count(*) FROM provider_calls WHERE model = 'm-1'").fetchone()
        triggers = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'hs_spend_%'"
        ).fetchone()
    finally:
        conn.close()
    assert written == (1,) and triggers == (3,)
    with Store.open(path) as store:
        assert_all_exact(store)
        dump = oracle("dump", path)
        for name in ("spend_by_model", "spend_by_day"):
            assert debug(getattr(store, name)(ZERO)) == parse(dump[name])


@pytest.mark.parametrize("since", [None, "2026-01-01", "2026-09-01 11", "2026-12-31T23:59Z"])
@pytest.mark.slow_on("postgresql")
def test_stamps_that_are_no_date_group_as_upstream_groups_them(
    store_target: str, since: str | None
) -> None:
    """A call's day is the first ten characters of `at`, whatever they are (a day key that
    is no date has no next day to bound its range: it is found by its key alone)."""
    rng = random.Random(11)
    with Store.open(store_target) as store:
        run = store.start_run("g", "f")
        rows = calls(rng, [run], ["2026-09-01"], 40)
        odd = ["", "2026", "x", "2026-13-45 10:00", "2026-13-45 12:00"] * 8
        for row, at in zip(rows, odd, strict=True):
            row["at"] = at
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), rows)
        store.spend_by_day(PRICES)
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), rows[:5])
        assert_all_exact(store, since)


SPELLED = [
    ("2026-12-07 06:51:00", "2026-12-07T05:00:00.000Z"),  # datetime('now') and upstream's
    ("2026-12-07 23:00:00", "2026-12-07T06:50:00.000Z"),
    ("2026-12-08 00:00:00", "2026-12-08T00:00:00.000Z"),
]


@pytest.mark.parametrize(
    "since",
    [
        "2026-12-07",
        "2026-12-07T00",
        "2026-12-07T06:00",  # keeps 06:51 spelled with a space, drops 05:00 spelled with a T
        "2026-12-07 06:50:00",
        "2026-12-07T06:50:00.001Z",
        "2026-12-07 23:59",  # drops a call at 06:50 spelled with a T
        "2026-12-07T08:51+02:00",
        "2026-12-08",
    ],
)
@pytest.mark.slow_on("postgresql")
def test_since_is_an_instant_whatever_the_calls_spelling(store_target: str, since: str) -> None:
    """`since` is one instant, compared as an instant with calls stamped in either of
    upstream's spellings: by the counters, the plain way and the exact way alike."""
    from harness_store.stamps import Stamp

    rng = random.Random(11)
    with Store.open(store_target) as store:
        runs = [store.start_run("g", "f") for _ in range(2)]
        rows = calls(rng, runs, ["2026-12-07"], 2 * len(SPELLED) * 3)
        stamps = [at for pair in SPELLED for at in pair] * 3
        for row, at in zip(rows, stamps, strict=True):
            row["at"] = at
        with store.engine.begin() as conn:
            conn.execute(insert(CALLS), rows)
        start = Stamp.parse(since)
        want = sum(1 for at in stamps if Stamp.read(at) >= start)  # type: ignore[operator]
        for by in BYS:
            for _ in range(2):  # and from what the first answer kept
                got = getattr(store, f"spend_by_{by}")(PRICES, since=since)
                assert sum(s.calls for s in got) == want, (by, since)
            assert exact(store, PRICES, by, since) == got


def test_since_that_names_no_instant_is_refused(tmp_path: Path) -> None:
    from harness_store.errors import InvalidValueError

    with Store.open(tmp_path / "runs.sqlite3") as store:
        for bad in ("2026-09", "last week", "2026-09-02 1'\\%_"):
            with pytest.raises(InvalidValueError, match="since"):
                store.spend_by_model(PRICES, since=bad)
