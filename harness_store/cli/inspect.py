"""`harness-store inspect`: what a store is."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass
    pass
from .app import DbArg, JsonOpt, SchemaOpt, app
from .output import emit_json, emit_pairs, emit_table, human_size
from .reader import Reader, in_schema, open_reader, suggest

# --- inspect -----------------------------------------------------------------------------


def table_order(names: Iterable[str]) -> list[str]:
    """The 0.13 tables in the models' order, then any others alphabetically."""
    from .. import models as m

    known = [name for name in m.Base.metadata.tables if name in names]
    return known + sorted(set(names) - set(known))


def inspect_document(reader: Reader) -> dict[str, Any]:
    """Everything `inspect` reports, as one JSON-ready mapping."""
    from ..dialects.read_only_files import WAL_SUFFIX, beside, in_wal_mode
    from ..engine import safe_url, sqlite_path
    from ..releases import HEAD
    from ..schema.detect import StoreKind, read_revision

    found = reader.found
    path = sqlite_path(reader.url)
    from ..store.listings import Listings

    store = Listings(reader.store)
    with reader.connection() as conn:
        revision = read_revision(conn)
        rows = store.row_counts()
        counts = {name: rows[name] for name in table_order(found.tables) if name in rows}
        journal = store.journal_mode()
        if path is not None and in_wal_mode(path):
            journal = "wal"  # an immutable open reports its own mode, not the file's
        size = path.stat().st_size if path is not None else store.database_bytes()
    wal = beside(path, WAL_SUFFIX) if path is not None else None
    return {
        "store": safe_url(reader.url),
        "path": str(path) if path is not None else None,
        "backend": reader.url.get_backend_name(),
        "kind": found.kind.value,
        "description": found.describe(),
        "release": found.release,
        "torn_of": found.torn_of,
        "present": list(found.present),
        "missing": list(found.missing),
        "extra": list(found.extra),
        "revision": revision,
        "shape_revision": found.revision,
        "head": HEAD,
        "at_head": revision == HEAD,
        "readable": found.kind is not StoreKind.EMPTY and found.holds_upstream_head,
        "user_version": found.user_version,
        "journal_mode": journal,
        "size_bytes": size,
        "wal_bytes": wal.stat().st_size if wal is not None and wal.exists() else None,
        "tables": counts,
    }


@app.command("inspect")
def inspect_command(db: DbArg, as_json: JsonOpt = False, schema: SchemaOpt = None) -> None:
    """What this store is: the io-harness release its shape matches (or "torn open of X", or
    "newer than 0.66"), its Alembic revision, user_version, journal mode, size and rows per
    table. Read-only: the file's bytes stay the same."""
    db = in_schema(db, schema)
    from ..releases import HEAD
    from ..schema.detect import StoreKind

    with open_reader(db, require_readable=False, shape=True) as reader:
        doc = inspect_document(reader)
    if as_json:
        emit_json(doc)
        return
    if doc["revision"] is not None:
        revision = f"{doc['revision']} (stamped)"
    elif doc["shape_revision"] is not None:
        revision = f"not stamped; its shape is revision {doc['shape_revision']}"
    else:
        revision = "not stamped"
    if doc["at_head"]:
        state = f"at head ({HEAD})"
    elif doc["kind"] == StoreKind.EMPTY.value:
        state = "no run store yet (`harness-store upgrade` would create one)"
    else:
        state = f"below head ({HEAD}): run {suggest('upgrade', reader.url)}"
        if not doc["readable"]:
            state += " before the read commands can read it"
    size = human_size(doc["size_bytes"])
    if doc["wal_bytes"] is not None:
        size += f"; -wal {human_size(doc['wal_bytes'])}"
    emit_pairs(
        [
            ("store", reader.where),
            ("is", doc["description"]),
            ("revision", revision),
            ("upgrade", state),
            ("user_version", str(doc["user_version"])),
            ("journal mode", doc["journal_mode"] or "n/a (PostgreSQL)"),
            ("size", size),
        ]
    )
    emit_table(
        [("table", "left"), ("rows", "right")],
        [(name, f"{count:,}") for name, count in doc["tables"].items()],
    )
