"""A reader process: read trees, summaries and counts while writers write, checking that every
read is consistent.

    python contention_reader.py PATH ROOT COUNT GO_FILE STOP_FILE

The writers checkpoint steps 1..COUNT with 1 token each under the children of ROOT, so in any
one snapshot a child's highest step equals its tokens. Each round reads:
  * `tree(ROOT)` (one query): per child steps == tokens ≤ COUNT;
  * `spent_tokens_tree(ROOT)`: never decreasing;
  * `run_summary` of each child: once there, steps == tokens == COUNT;
  * in one statement (one snapshot): steps, checkpoint events, steps without their event and
    events without their step — the counts must be equal and the orphans zero.
Prints `ready`, then at the end `reads N partial P` (P = rounds that saw writers mid-way).
Any violation ends the process with a message on stderr and exit status 1.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

from harness_store import Store

COUNTS = (
    "SELECT (SELECT count(*) FROM steps), "
    "(SELECT count(*) FROM checkpoint_events WHERE kind = 'checkpoint'), "
    "(SELECT count(*) FROM steps s WHERE NOT EXISTS (SELECT 1 FROM checkpoint_events c "
    "WHERE c.run_id = s.run_id AND c.step = s.step AND c.kind = 'checkpoint')), "
    "(SELECT count(*) FROM checkpoint_events c WHERE NOT EXISTS (SELECT 1 FROM steps s "
    "WHERE c.run_id = s.run_id AND c.step = s.step))"
)


def fail(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def main() -> None:
    path, root, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    go, stop = Path(sys.argv[4]), Path(sys.argv[5])
    store = Store.open(path, upgrade=False)
    raw = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.001)
    reads = partial = 0
    spent_before = 0
    while True:
        finished = stop.exists()  # one last round after the writers are done
        nodes = store.tree(root)
        children = [n for n in nodes if n.run_id != root]
        for node in children:
            if not (node.steps == node.tokens <= count):
                fail(f"torn tree read: {node}")
        spent = store.spent_tokens_tree(root)
        if not spent_before <= spent <= count * len(children):
            fail(f"spent_tokens_tree went from {spent_before} to {spent}")
        spent_before = spent
        for node in children:
            summary = store.run_summary(node.run_id)
            if summary is not None and not (summary.steps == summary.tokens == count):
                fail(f"summary of run {node.run_id} before its steps: {summary}")
        steps, events, steps_alone, events_alone = raw.execute(COUNTS).fetchone()
        if steps != events or steps_alone or events_alone:
            fail(
                f"a step without its checkpoint event: {steps} steps, {events} events, "
                f"{steps_alone} steps alone, {events_alone} events alone"
            )
        reads += 1
        partial += 0 < steps < count * len(children)
        if finished:
            break
    raw.close()
    store.close()
    print(f"reads {reads} partial {partial}", flush=True)


if __name__ == "__main__":
    main()
