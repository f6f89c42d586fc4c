"""Rows written as each release writes them (`write_rows`: every table its methods reach, the
awkward texts verbatim), and whole stores built from them: born at a release, grown release
by release, or torn by a crash during an open.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .methods import _json, _policy, _Step, _Store
from .opens import RELEASES, _minor, open_as

#: Workspaces `write_rows` keeps memory in (fixed, so `read_answers` can list them).
WORKSPACES: tuple[str, ...] = ("/work/ws-alpha", "/tmp/ünï 'ws' \"β\"")


#: Ledger observation kinds as 0.13 stores them.
OBS_KINDS: tuple[str, ...] = (
    "read",
    "grep",
    "find",
    "write",
    "skill",
    "tool",
    "mcp",
    "child",
    "message",
    "error",
)


BIG = 2**53 + 1


LONG_TEXT_CHARS = 100_000


# Awkward text values; each `write_rows` call stores every one of them verbatim somewhere.
AWKWARD: tuple[str, ...] = (
    "it's a 'single' quote",
    'say "double" quotes',
    "'; DROP TABLE runs; --",
    "Robert'); DROP TABLE steps;--",
    "100% _like_ wildcards \\ backslash",
    "crab 🦀 rocket 🚀 family 👩\u200d👩\u200d👧",
    "日本語のテキスト 中文 한국어",
    "combining e\u0301 a\u0308 n\u0303",
    "RTL مرحبا بالعالم שלום \u202eoverride",
    "",
    "tab\there\r\nCRLF and\nnewline",
    "nul\x00inside",
    '{"json": [1, 2, {"k": "v"}]}',
)


@dataclass
class WrittenRows:
    """What `write_rows` wrote: the keys to read it back by, and the texts stored verbatim."""

    releases: list[str] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    roots: list[int] = field(default_factory=list)
    pending_ids: list[int] = field(default_factory=list)
    spawn_keys: list[tuple[int, int, str]] = field(default_factory=list)
    memory_keys: list[tuple[str, str]] = field(default_factory=list)
    evicted: list[tuple[str, str]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def merge(self, other: WrittenRows) -> None:
        """Append another call's rows, so a lineage reports everything it wrote."""
        self.releases += other.releases
        self.run_ids += other.run_ids
        self.roots += other.roots
        self.pending_ids += other.pending_ids
        self.spawn_keys += other.spawn_keys
        self.memory_keys += [k for k in other.memory_keys if k not in self.memory_keys]
        self.evicted += other.evicted
        self.texts += [t for t in other.texts if t not in self.texts]


def long_text(seed: int = 0) -> str:
    """Return the ~100 KB mixed-script text `write_rows` stores in one step result."""
    unit = f"seed {seed}: ascii é 🦀 日本 \u05e9 '\" ;--\n"
    return (unit * (LONG_TEXT_CHARS // len(unit) + 1))[:LONG_TEXT_CHARS]


def write_rows(conn: sqlite3.Connection, release: str, seed: int = 0) -> WrittenRows:
    """Write a realistic run history the way release X's `Store` methods write it.

    Only X's tables and columns are touched. Values are deterministic from (seed, release)
    except SQLite clock stamps. From 0.7 the oldest still-running run is resumed and finished.
    """
    m = _minor(release)
    rng = random.Random(f"io-harness-legacy:{seed}:{release}")
    awkward = list(AWKWARD)
    rng.shuffle(awkward)
    cycle: Iterator[str] = itertools.cycle(awkward)
    out = WrittenRows(releases=[release])

    def nxt() -> str:
        text = next(cycle)
        if text not in out.texts:
            out.texts.append(text)
        return text

    s = _Store(conn, m)
    previous = conn.isolation_level
    conn.isolation_level = None
    try:
        _write(s, m, release, seed, rng, nxt, out)
    finally:
        conn.isolation_level = previous
    return out


def _write(
    s: _Store,
    m: int,
    release: str,
    seed: int,
    rng: random.Random,
    nxt: Callable[[], str],
    out: WrittenRows,
) -> None:
    """Write the rows for `write_rows` (split out to keep the setup readable)."""
    tag = f"[{release} seed {seed}]"
    # Prompt and tool call are stored from 0.2; before that a step has no place for them.
    trace: Callable[[], str] = nxt if m >= 2 else str
    resumable: list[int] = []
    if m >= 7:
        resumable = [
            r[0]
            for r in s.conn.execute(
                "SELECT id FROM runs WHERE outcome IS NULL AND status = 'running' "
                "ORDER BY id LIMIT 1"
            )
        ]

    # Run A: a root that succeeds, with a retry sharing step 2 (retries exist from 0.2).
    a = s.start_run(f"write out.txt {tag} {nxt()}", "out.txt")
    out.run_ids.append(a)
    out.roots.append(a)
    if m >= 3:
        s.set_provider(a, f"anthropic {nxt()}")
    # Texts inside JSON are escaped there, so they come from `rng`, not the verbatim cycle.
    tool_call = _json({"content": rng.choice(AWKWARD)}) if m >= 2 else ""
    s.checkpoint_step(a, _Step(1, "wrote file", nxt(), trace(), tool_call, 128))
    if m >= 2:
        s.record(a, _Step(2, "retry 1 after error", nxt(), trace(), "", 7))
    s.checkpoint_step(a, _Step(2, "verified", nxt(), "", "", BIG))
    s.checkpoint_step(a, _Step(3, nxt(), "", "", "", 0))

    # Run B: paused awaiting approval (a plain capped run before 0.4).
    b = s.start_run(nxt(), nxt())
    out.run_ids.append(b)
    out.roots.append(b)
    s.checkpoint_step(b, _Step(1, "asked to write", nxt(), "p", "{}", 3))

    # Run C: crashed mid-run, holding the ~100 KB result; stays running.
    c = s.start_run("", f"crash.txt {tag}")
    out.run_ids.append(c)
    out.roots.append(c)
    s.checkpoint_step(c, _Step(1, "read file", long_text(seed), trace(), "", 2**40))

    if m >= 4:
        s.record_event(a, 1, "refusal", "read", ".env", ".env", "builtin-secrets")
        s.record_event(a, 1, "refusal", "write", nxt())
        s.record_event(
            a, 2, "decision", "write", "out.txt", "*.txt", nxt(), "approve", "cli", nxt()
        )
        if m >= 8:
            s.record_event(a, 2, "refusal", "net", "api.example.com:443", None, None)
        p1 = s.put_pending(b, 1, "write", "src/a.rs", nxt())
        s.record_event(b, 1, "decision", "write", "src/a.rs", None, None, "defer", "cli")
        p2 = s.put_pending(b, 1, "exec", f"cargo test {nxt()}", None)
        s.resolve_pending(p2, "deny")
        out.pending_ids += [p1, p2]
        s.finish_run(b, "awaiting_approval")
    else:
        s.finish_run(b, "step_cap_reached")

    if m >= 5:
        g1 = nxt()
        c1 = s.start_child_run(g1, "child.txt", a, 1)
        gc = s.start_child_run(f"grandchild {tag}", "g.txt", c1, 2)
        g2 = nxt()
        c2 = s.start_child_run(g2, nxt(), a, 1)
        out.run_ids += [c1, gc, c2]
        s.agent_event(a, 2, "spawn", c1, g1, None, None)
        s.agent_event(a, 2, "spawn", c2, g2, None, None)
        s.agent_event(c1, 1, "spawn", gc, f"grandchild {tag}", None, None)
        s.agent_event(a, 3, "spawn_refused", None, "max_depth", None, None)
        s.agent_event(c1, 1, "budget_draw", None, None, BIG, 2**62)
        s.agent_event(gc, 1, "budget_draw", None, None, 0, 0)
        if m >= 7:
            deny = _json(["secrets/*", rng.choice(AWKWARD)])
            s.record_spawn(a, 2, c1, g1, "child.txt", nxt(), 8, deny)
            s.record_spawn(a, 2, c2, g2, "c2.txt", "", None, "[]")
            s.record_spawn(c1, 1, gc, f"grandchild {tag}", "g.txt", "done", 3, '["*"]')
            out.spawn_keys += [(a, 2, g1), (a, 2, g2), (c1, 1, f"grandchild {tag}"), (a, 9, "none")]
        s.checkpoint_step(c1, _Step(1, "spawned", nxt(), trace(), "", 1000))
        s.checkpoint_step(gc, _Step(1, "wrote file", "done", "", "", BIG))
        s.checkpoint_step(c2, _Step(1, "read file", nxt(), "", "", 5))
        s.finish_run(gc, "success")
        s.finish_run(c1, "budget_ceiling_reached")

    if m >= 6:
        backend = "macos-sandbox-exec"
        s.sandbox_event(a, 1, "create", backend, None)
        s.sandbox_event(a, 1, "exec", backend, f"rustc --edition 2021 {nxt()}")
        s.sandbox_event(a, 2, "cap_hit", None, "memory")
        s.sandbox_event(a, 3, "destroy", None, None)
        if m >= 9:
            s.sandbox_event(a, 3, "gate_phase_failed", None, "criterion-compile")

    if m >= 7:
        s.checkpoint_event(a, 1, "skipped", None)
        s.checkpoint_event(a, 2, "resume", nxt())
        f = s.start_run(f"failed run {tag}", "f.txt")
        out.run_ids.append(f)
        out.roots.append(f)
        s.set_status(f, "failed")
        for old in resumable:
            last = s.conn.execute(
                "SELECT COALESCE(MAX(step), 0) FROM steps WHERE run_id = ?", (old,)
            ).fetchone()[0]
            s.checkpoint_event(old, last + 1, "resume", f"resumed by {release}")
            s.checkpoint_event(old, last, "skipped", None)
            s.checkpoint_step(old, _Step(last + 1, "resumed", nxt(), "", "", 11))
            s.finish_run(old, "success")

    if m >= 8:
        s.record_mcp(a, 0, "connected", "fs", None, None, 12, "stdio")
        s.record_mcp(a, 0, "discovered", "fs", "fs__read", None, None, None)
        s.record_mcp(a, 1, "called", "fs", "fs__read", True, BIG, None)
        s.record_mcp(a, 2, "called", nxt(), "fs__write", False, 0, nxt())
        s.record_mcp(a, 3, "disconnected", "fs", None, None, None, "")

    if m >= 10:
        ws0, ws1 = WORKSPACES
        keys = [(ws0, "build"), (ws0, "long"), (ws0, nxt()), (ws0, ""), (ws0, f"note {release}")]
        s.memory_put(ws0, "build", "cargo build --release", a, 1)
        s.memory_put(ws0, "long", long_text(seed), a, 2)
        s.memory_put(keys[2][0], keys[2][1], nxt(), a, 2)
        s.memory_put(ws0, "", "", a, 1)
        s.memory_put(ws0, f"note {release}", nxt(), a, 3)
        s.memory_put(ws0, "build", f"cargo build (overwritten by {release})", a, 3)
        evicted: list[str] = []
        # ws1 only ever gains fresh keys, so its (created_at, id) order, and thus what the
        # caps evict, is the insertion order whatever the clock does.
        for i in range(9):  # 9 x 1,990 chars breaks the 16,000-char cap: evicts oldest first
            key = f"fill {release} {i}"
            keys.append((ws1, key))
            evicted += s.memory_put(ws1, key, (f"{i} {tag} ünï " * 200)[:1990], a, 3)
        out.evicted += [(ws1, k) for k in evicted]
        out.memory_keys += [k for k in keys if k not in out.memory_keys]
        s.context_event(a, 1, "assembled", "carried=3 stubbed=5 reread=1", BIG)
        s.context_reported(a, 1, BIG + 2)
        s.context_event(a, 2, "reread", nxt())
        s.context_event(a, 2, "reread_refused", ".env: denied by policy")
        s.context_event(a, 3, "memory_write", "build")
        s.context_event(a, 3, "memory_evict", ", ".join(evicted))
        s.context_event(a, 1, "memory_recall", nxt())
        if m >= 11:
            s.context_event(a, 2, "served", "openai")
            s.context_event(a, 3, "stalled", nxt())
        if m >= 12:
            s.context_event(a, 3, "replan", nxt())

    if m >= 13:
        base = ("builtin-secrets", [("read", "deny", ".env"), ("write", "deny", ".env")])
        s.record_run_policy(a, _policy(defaults=("allow",) * 4))  # permissive, then replaced
        s.record_run_policy(a, _policy(base, ("base", [("read", "allow", rng.choice(AWKWARD))])))
        s.record_run_policy(
            c,
            _policy(
                ("exec", [("exec", "allow", "cargo")]), defaults=("allow", "deny", "ask", "ask")
            ),
        )
        kinds = list(OBS_KINDS)
        rng.shuffle(kinds)
        entries = [
            (1 + i // 4, k, None if k in ("message", "error") else nxt(), nxt())
            for i, k in enumerate(kinds)
        ]
        s.record_observations(a, entries)
        s.record_observations(a, [])

    # The crashed run C got further before dying: its later steps hold every awkward text
    # not written yet, so each call stores all of them.
    for k, text in enumerate((t for t in AWKWARD if t not in out.texts), start=2):
        out.texts.append(text)
        s.checkpoint_step(c, _Step(k, text, text, text, "", k))
    s.finish_run(a, "success")
    s.finish_run(a, "success")  # a finished run resumed again: idempotent (replaces at 0.12+)


def _connect(path: str | Path) -> sqlite3.Connection:
    """Open a file like a new upstream process would (no implicit transactions).

    `synchronous = OFF` only skips fsyncs (about 6x faster builds); it is not stored in the
    file and changes nothing a store holds.
    """
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    return conn


def build_born_at(path: str | Path, release: str, seed: int = 0) -> WrittenRows:
    """Create a file store with release X's open, then write rows as X; `path` should not exist."""
    conn = _connect(path)
    try:
        open_as(conn, release, file=True)
        return write_rows(conn, release, seed)
    finally:
        conn.close()


def build_lineage(path: str | Path, release: str, seed: int = 0) -> WrittenRows:
    """Grow a file store from 0.1 to X: each release opens it (its own process) and writes rows."""
    out = WrittenRows()
    for r in RELEASES[: _minor(release)]:
        out.merge(build_born_at(path, r, seed))
    return out


def build_torn(path: str | Path, release: str, stop_after: int, seed: int = 0) -> WrittenRows:
    """Build the lineage store of the release before X, then run X's open killed after k.

    `k` (`stop_after`) counts X's open statements; see `torn_points` for the interesting ones.
    """
    m = _minor(release)
    out = build_lineage(path, RELEASES[m - 2], seed) if m > 1 else WrittenRows()
    conn = _connect(path)
    try:
        open_as(conn, release, stop_after=stop_after, file=True)
    finally:
        conn.close()
    return out
