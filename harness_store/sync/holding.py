"""Which runs a pass holds back (`quarantine`): the values the destination cannot hold found
before anything is written, the runs held before looked at again, released once they can be
sent.

Each run held is marked with a fingerprint of its rows (`RUN_HELD_MARK`). A pass reads the
held runs' rows first (few) and compares: while none changed, what the last pass found of
them still holds, and the pass costs what a clean one does: the state tables marked as
sent (`HELD_MARK` only until the pass's end), the held runs' entries taken from the centre,
nothing of them encoded or written again. Once one changed, every state table is compared
whole, as the release of a run needs."""

from __future__ import annotations

from typing import Any

from ..errors import UnsendableValueError
from ..stamps import Stamp
from . import quarantine
from .finding import known
from .origin_state import HELD_MARK, STATE_MARK, OriginState
from .report import HeldRun
from .rules import RULES, RUNS

RUN_HELD_MARK = "?"
"""Prefix of a mark per run the origin holds back (its source id follows): the fingerprint of
its rows as last held (`quarantine.fingerprint`)."""


class Holding(OriginState):
    """Finding the runs one origin's pass holds back."""

    held_entries: dict[int, HeldRun] | None = None
    """The centre's entries of the runs held back before this pass, once read."""
    held_raw: dict[int, bytes] = {}  # noqa: RUF012 - replaced, never changed in place
    """The rows of runs held back, as `quarantine.encoded` gives them, once read this pass."""
    held_prints: dict[int, int] = {}  # noqa: RUF012 - replaced, never changed in place
    """The fingerprints of the runs this pass holds back, their marks at its end."""
    held_steady = False
    """Whether no run held back before changed since (their entries hold as they are)."""
    held_lenient = False
    """Whether a run held back holds a text whose bytes are not UTF-8 (the source is read
    leniently)."""

    def _held_marks(self) -> dict[int, int]:
        return {
            int(mark[len(RUN_HELD_MARK) :]): hwm
            for mark, hwm in self.hwm_loaded.items()
            if mark.startswith(RUN_HELD_MARK)
        }

    def _look_again_at_held(self) -> None:
        """Before anything is read: read the rows of the runs held back before (their rows
        only: few) and tell whether any changed since the last pass. None did: they stay
        held as they are (`held_steady`). One did, or the marks predate the fingerprints:
        the texts whose bytes are not UTF-8 in those runs are noted, so that such a run stays
        held without a read failing on it first, and every state table is compared whole
        (the rows of a run released are sent)."""
        marks = self._held_marks()
        legacy = not marks and self.hwm_loaded.get(STATE_MARK + RUNS) == HELD_MARK
        if not marks and not legacy:
            return
        before = self.held_entries = quarantine.load(self.central, self.origin_id)
        encoded = quarantine.encoded(self.src, self.have, before)
        self.held_raw = {run: raw for run, (raw, _) in encoded.items()}
        prints = {run: quarantine.fingerprint(raw) for run, raw in self.held_raw.items()}
        self.held_steady = bool(before) and not legacy and prints == marks
        if self.held_steady:
            self.held = set(before)
            self.held_prints = prints
            self.quarantined = [before[run] for run in sorted(before)]
            self.held_lenient = any(bad for _, bad in encoded.values())
            return
        if before:
            for table, (run, row, column, said) in quarantine.not_utf8(self.src, self.have, before):
                if run is not None:
                    self.unreadable.setdefault(run, (table, row, column, said))
        for rule in RULES:
            if rule.kind == "state" and rule.table in self.have:
                self.hwm_loaded[STATE_MARK + rule.table] = HELD_MARK

    def _hold_values(self, read: dict[str, tuple[Any, Any, int]], *, whole: bool) -> None:
        """Find, before anything is written, every value among the rows this pass sends that
        the destination cannot hold as it is (`transfer.values.refusals`, the check copy
        makes): in the rows of every state table that changed, or all of them when the
        origin is sent `whole`, and the rows of every append table above its mark. The run
        of such a row is held back (`quarantine`), with what waits for it; a value in no
        run's row refuses the source (`UnsendableValueError`). Runs held back before are
        looked at again (unless none changed: what was found of them holds): one whose rows
        the centre can now hold is released, sent whole by this pass. Only the entries of
        runs new or changed are written."""
        found: dict[int, tuple[str, str | None, str | None, str]] = {}
        for rule in RULES:
            if rule.table not in self.have:
                continue
            above: int | None = None
            runs = None
            if rule.kind == "state":
                if (
                    not whole
                    and self.hwm_loaded.get(STATE_MARK + rule.table) == read[rule.table][2]
                ):
                    continue
                runs = self.suspects.get(rule.table) if rule.table in self.partial else None
            else:
                above = 0 if whole else self.hwm.get(rule.table, 0)
                if self.tops.get(rule.table, 0) <= above:
                    continue
            for run, row, column, said in quarantine.find(
                self.src, self.have, self.backend, rule, above=above, runs=runs
            ):
                if run is None:
                    raise UnsendableValueError(f"{rule.table}.{column} of the row {row} {said}")
                found.setdefault(run, (rule.table, row, column, said))
        for run, entry in self.unreadable.items():  # texts a read of the source failed on
            found.setdefault(run, entry)
        before = self.held_entries
        if before is None:
            before = {} if self.fresh else quarantine.load(self.central, self.origin_id)
        if self.held_steady:  # unchanged: the values found before are there still
            for run, kept in before.items():
                if kept.column is not None:
                    found.setdefault(run, (kept.table, kept.row, kept.column, kept.problem))
        elif before:
            for rule, _ in quarantine.run_rules(self.have):
                for run, row, column, said in quarantine.find(
                    self.src, self.have, self.backend, rule, runs=before
                ):
                    if run is not None:
                        found.setdefault(run, (rule.table, row, column, said))
        family = (
            quarantine.waiting(
                self.src,
                self.have,
                {r: f[3] for r, f in found.items()},
                set() if whole else known(self.ids[RUNS]),
            )
            if found
            else {}
        )
        held = [
            HeldRun(run, *found[run], new=run not in before)
            if run in found
            else HeldRun(run, RUNS, None, None, family[run], new=run not in before)
            for run in sorted(family)
        ]
        self.held = set(family)
        self.held_sessions = quarantine.held_sessions(self.src, self.have, self.held)
        self.released = sorted(set(before) - self.held)
        self.reload_runs.update(self.released)
        self.quarantined = held
        raw = dict(self.held_raw)
        missing = sorted(self.held - set(raw))
        raw.update(
            (run, r) for run, (r, _) in quarantine.encoded(self.src, self.have, missing).items()
        )
        marks = self._held_marks()
        self.held_prints = {run: quarantine.fingerprint(raw[run]) for run in self.held}
        changed = [
            entry
            for entry in held
            if entry.new
            or self.held_prints[entry.run] != marks.get(entry.run)
            or entry != before[entry.run]
        ]
        if changed:
            quarantine.save(self.dst, self.origin_id, changed, raw, Stamp.now().text)

    def _mark_held(self, totals: dict[str, int]) -> None:
        """Mark each run held back with its fingerprint (and forget the marks of runs no
        longer held); a state table whose rows of held runs were left out is marked with its
        total as read, as if sent whole: while its held runs do not change, the next pass
        finds it unchanged (`_look_again_at_held`)."""
        for mark in [m for m in self.hwm if m.startswith(RUN_HELD_MARK)]:
            del self.hwm[mark]
        self.hwm.update({f"{RUN_HELD_MARK}{run}": fp for run, fp in self.held_prints.items()})
        if self.held_prints:
            for table, total in totals.items():
                if self.hwm.get(STATE_MARK + table) == HELD_MARK:
                    self.hwm[STATE_MARK + table] = total
