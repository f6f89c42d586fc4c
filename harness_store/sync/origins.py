"""Who a source store is: its origin.

An origin is one source store, known centrally by a UUID. With `mark=True` the UUID is written
into the source itself (table `hs_sync_origin`, the only write sync ever makes to a source), so
the store keeps its origin wherever it is copied or moved. Without it nothing is written to the
source: the destination recognises the store by its file identity — host, device and inode of
the resolved path — and records the path it was last seen at. An inode the filesystem reuses
for a new store is told apart by the origin's anchor, the id and start time of the first run it
sent: a source whose run with that id started at another time is a different store, and gets a
new origin. Marking a store synced before without a mark adopts the origin it already has.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, delete, inspect, select, update

from ..connector import connector_at
from ..models.sync import ORIGINS, QUARANTINE, SOURCE_MARKER


@dataclass(frozen=True)
class SourceIdentity:
    """What identifies a source file before any of its rows is read."""

    path: Path
    host: str
    device: int
    inode: int
    mark: str | None
    """The UUID the source carries, if it was ever synced with `mark=True`."""

    @property
    def file_key(self) -> str:
        """`file:<host>:<device>:<inode>`: the source's identity without a mark."""
        return f"file:{self.host}:{self.device}:{self.inode}"

    @property
    def key(self) -> str:
        """The identity the destination knows this source by."""
        return f"mark:{self.mark}" if self.mark else self.file_key


@dataclass(frozen=True)
class Origin:
    """An origin as the destination records it."""

    id: int
    uuid: str
    anchor: str | None
    created: bool
    """Whether this sync registered it."""
    warnings: tuple[str, ...] = ()
    was: dict[str, Any] | None = None
    """An existing origin's row as it was before this sync registered it (`unregister`)."""


def identify(path: Path, mark: str | None) -> SourceIdentity:
    """The identity of the source file at `path` (resolved), carrying `mark` if it has one."""
    resolved = path.resolve()
    info = os.stat(resolved)
    return SourceIdentity(resolved, socket.gethostname(), info.st_dev, info.st_ino, mark)


def read_mark(src: Connection) -> str | None:
    """The origin UUID written into a source by an earlier `mark=True` sync, if any."""
    if not inspect(src).has_table(SOURCE_MARKER.name):
        return None
    value = src.execute(select(SOURCE_MARKER.c.uuid).limit(1)).scalar()
    return str(value) if value else None


def write_mark(path: Path, value: str) -> None:
    """Write the origin UUID into the source (one small write transaction, waiting out a live
    io-harness writer on the busy timeout). A mark already there is kept."""
    with connector_at(path) as source, source.write() as conn:
        SOURCE_MARKER.create(conn, checkfirst=True)
        if conn.execute(select(SOURCE_MARKER.c.uuid)).first() is None:
            conn.execute(SOURCE_MARKER.insert().values(uuid=value))


def find(dst: Connection, ident: SourceIdentity) -> tuple[int, str, str | None] | None:
    """The origin registered for `ident` (by identity, or a marked source by its UUID)."""
    row = _find_row(dst, ident)
    return (int(row[0]), str(row[1]), row[2]) if row is not None else None


def _find_row(dst: Connection, ident: SourceIdentity) -> Any:
    columns = (ORIGINS.c.id, ORIGINS.c.uuid, ORIGINS.c.anchor, ORIGINS.c.path)
    row = dst.execute(
        select(*columns, ORIGINS.c.device, ORIGINS.c.inode).where(ORIGINS.c.identity == ident.key)
    ).first()
    if row is None and ident.mark:
        row = dst.execute(
            select(*columns, ORIGINS.c.device, ORIGINS.c.inode).where(ORIGINS.c.uuid == ident.mark)
        ).first()
    return row


def _same_store_renamed(dst: Connection, ident: SourceIdentity, anchor: str) -> Any:
    columns = (ORIGINS.c.id, ORIGINS.c.uuid, ORIGINS.c.anchor, ORIGINS.c.path)
    return dst.execute(
        select(*columns, ORIGINS.c.device, ORIGINS.c.inode).where(
            ORIGINS.c.host == ident.host,
            ORIGINS.c.path == str(ident.path),
            ORIGINS.c.marked == 0,
            ORIGINS.c.anchor == anchor,
            ORIGINS.c.identity.startswith("file:"),
            ORIGINS.c.identity.not_like("%:retired:%"),
        )
    ).first()


def copy_warning(row: Any, ident: SourceIdentity) -> str | None:
    """A warning when a marked source is synced from another file than last time while that
    file is still there: two copies of one marked store overwrite each other's runs."""
    if not ident.mark or row.path == str(ident.path):
        return None
    try:
        before = os.stat(row.path)
    except OSError:
        return None  # moved: the old file is gone
    if (before.st_dev, before.st_ino) == (ident.device, ident.inode):
        return None  # the same file under another name
    return (
        f"origin {row.uuid} was last synced from {row.path}, which is still there: if "
        f"{ident.path} is a copy of it, the two overwrite each other's runs centrally; sync "
        "only the copy still in use"
    )


def register(dst: Connection, ident: SourceIdentity, now: str, anchor: str | None = None) -> Origin:
    """The origin of `ident` in the destination, registered now if it is new, its row locked
    until the transaction ends; where and when the source was seen is brought up to date.

    An unmarked source at the path of an origin whose anchor (first run) it shares is that
    origin's store put back as a new file (a backup restored by rename): it keeps the
    origin, whose history check then finds what went back."""
    row = _find_row(dst, ident)
    if row is None and not ident.mark and anchor is not None:
        row = _same_store_renamed(dst, ident, anchor)
    seen = {
        "identity": ident.key,
        "host": ident.host,
        "path": str(ident.path),
        "device": ident.device,
        "inode": ident.inode,
        "marked": 1 if ident.mark else 0,
    }
    if row is not None:
        warning = copy_warning(row, ident)
        was = dst.execute(select(ORIGINS).where(ORIGINS.c.id == row.id)).one()._asdict()
        # the UPDATE also locks the origin's row: a concurrent sync of it waits its turn
        dst.execute(
            update(ORIGINS)
            .where(ORIGINS.c.id == row.id)
            .values(synced_at=now, syncs=ORIGINS.c.syncs + 1, **seen)
        )
        return Origin(
            int(row.id),
            str(row.uuid),
            row.anchor,
            created=False,
            warnings=(warning,) if warning else (),
            was=was,
        )
    value = ident.mark or str(uuid.uuid4())
    new_id = dst.execute(
        ORIGINS.insert()
        .values(uuid=value, first_synced_at=now, synced_at=now, syncs=1, **seen)
        .returning(ORIGINS.c.id)
    ).scalar_one()
    return Origin(int(new_id), value, None, created=True)


def unregister(dst: Connection, origin: Origin, now: str) -> None:
    """Put an existing origin's row back as it was before a pass that was refused after its
    first slices committed (where and when it was seen, its anchor, one sync fewer), unless
    another pass has registered it since."""
    if origin.was is None:
        return
    kept = {k: v for k, v in origin.was.items() if k not in ("id", "uuid", "syncs")}
    dst.execute(
        update(ORIGINS)
        .where(ORIGINS.c.id == origin.id, ORIGINS.c.synced_at == now)
        .values(syncs=ORIGINS.c.syncs - 1, **kept)
    )


def retire(dst: Connection, origin_id: int) -> None:
    """Free an origin's identity for the new store that reuses its file (the origin and its
    rows stay, under an identity nothing will match again). The runs it held in quarantine,
    which no sync of it will release now, go with it (in the caller's transaction)."""
    dst.execute(delete(QUARANTINE).where(QUARANTINE.c.origin_id == origin_id))
    dst.execute(
        update(ORIGINS)
        .where(ORIGINS.c.id == origin_id)
        .values(identity=ORIGINS.c.identity + ":retired:" + ORIGINS.c.uuid)
    )


def adopt_for_mark(dst: Connection, ident: SourceIdentity) -> str:
    """The UUID to mark an unmarked source with: the origin it already has (by its file
    identity), else a new one."""
    found = find(dst, ident)
    return found[1] if found is not None else str(uuid.uuid4())
