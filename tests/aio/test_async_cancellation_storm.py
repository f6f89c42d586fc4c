"""A storm of cancellations on one `AsyncStore`: many tasks at once, in blocks and nested
blocks, each cancelled at a random point. Every task ends in its own result or in
`CancelledError`, never in another error, and the store goes on whole."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from harness_store import AsyncStore, StepRecord, Store

TASKS = 24
ROUNDS = 12


async def work(store: AsyncStore, i: int, nested: bool) -> None:
    async with store.transaction():
        run_id = await store.start_run(f"storm-{i}", "f")
        if nested:
            async with store.transaction():
                await store.checkpoint_step(run_id, StepRecord.new(1, "a", "r"))
        else:
            await store.checkpoint_step(run_id, StepRecord.new(1, "a", "r"))
        await store.set_status(run_id, "whole")


def test_a_storm_of_cancelled_blocks_raises_only_cancellations(store_target: str) -> None:
    rng = random.Random(28)

    async def body() -> tuple[dict[str, int], int]:
        others: dict[str, int] = {}
        async with await AsyncStore.open(store_target) as store:
            for _ in range(ROUNDS):
                tasks = [
                    asyncio.ensure_future(work(store, i, nested=i % 2 == 0)) for i in range(TASKS)
                ]
                for _ in range(rng.randrange(0, 60)):
                    await asyncio.sleep(0)
                if rng.random() < 0.5:
                    await asyncio.sleep(rng.uniform(0, 0.01))
                for task in tasks:
                    if rng.random() < 0.7:
                        task.cancel()
                    if rng.random() < 0.2:
                        await asyncio.sleep(0)
                outcomes: list[Any] = await asyncio.gather(*tasks, return_exceptions=True)
                for outcome in outcomes:
                    if outcome is None or isinstance(outcome, asyncio.CancelledError):
                        continue
                    others[repr(outcome)] = others.get(repr(outcome), 0) + 1
            async with store.transaction():
                probe = await store.start_run("probe", "f")
            return others, probe

    others, probe = asyncio.run(body())
    assert others == {}
    with Store.open(store_target) as sync:
        for run_id in sync.runs():
            if run_id != probe:  # every block that committed committed whole
                assert sync.status(run_id) == "whole"
                assert [s.step for s in sync.steps(run_id)] == [1]
