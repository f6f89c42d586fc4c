"""`harness-store roles`: the login roles of a PostgreSQL centre, made or taken back by its owner.

A follower role may sync and follow its own origins and nothing else; a reader role reads
everything and writes nothing (`dialects.postgresql_roles` holds the grants, policies and
triggers that say so, which PostgreSQL enforces whatever SQL the role sends). The centre is
first brought to head with sync's tables, as a sync would, so a follower never needs to
create or migrate anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy.engine import URL

from ..connector import connector_at
from ..connector.translation import typed_or_same
from ..dialects import postgresql_roles as rules
from ..engine import safe_url, to_url
from ..errors import DuplicateObjectError, InvalidValueError, PrivilegeError
from .destination import prepare_dest

Kind = Literal["follower", "reader"]


@dataclass(frozen=True)
class RoleChange:
    """What `grant` or `revoke` did."""

    role: str
    kind: Kind | None
    """The role's kind now (None: revoked)."""
    origin: str | None = None
    """The origin bound to the follower by this call, if one was named."""
    known: bool = True
    """For a revoke: whether the role was one of the centre's."""


def _centre(dest: str) -> tuple[str, URL]:
    url = to_url(dest)
    if url.get_backend_name() != "postgresql":
        raise InvalidValueError(
            f"{safe_url(url)}: roles are a PostgreSQL centre's; a SQLite store is guarded by "
            "its file's permissions"
        )
    return safe_url(url), url


def _refused(exc: Exception, what: str) -> InvalidValueError | None:
    """What a role that is not the centre's owner is told (the error, typed, `exc`): its
    rights refused it (`PrivilegeError`), or an object it would make exists already, made by
    the owner (`DuplicateObjectError`); None for any other error."""
    found = typed_or_same(exc)
    if isinstance(found, PrivilegeError | DuplicateObjectError):
        said = str(found).split(": ", 1)[-1]
        return InvalidValueError(
            f"only the centre's owner (a role that may create roles) can {what}: {said}"
        )
    return None


def grant(dest: str, role: str, kind: Kind, origin: str | None = None) -> RoleChange:
    """Create the login role `role` (or bring it up to date) as a follower or reader of the
    PostgreSQL centre `dest`, which is brought to head with sync's tables first; `origin` (a
    UUID) binds that origin, and the runs it sent, to the follower."""
    if kind not in ("follower", "reader"):
        raise InvalidValueError(f"a role is a follower or a reader, not {kind!r}")
    if origin is not None and kind != "follower":
        raise InvalidValueError("only a follower role is bound to origins")
    shown, url = _centre(dest)
    with connector_at(url) as central:
        prepare_dest(central, url)
        try:
            with central.load() as conn:
                if origin is not None:
                    try:
                        rules.bind_origin_check(conn, origin)
                    except LookupError:
                        raise InvalidValueError(f"{shown} has no origin {origin}") from None
                rules.grant_role(conn, role, kind, origin)
        except Exception as exc:
            refused = _refused(exc, "make roles")
            if refused is None:
                raise
            raise refused from None
    return RoleChange(role, kind, origin)


def revoke(dest: str, role: str) -> RoleChange:
    """Take back every right `role` has on the centre `dest` (its origins go back to the
    owner); the login role itself stays, as roles are the cluster's."""
    _, url = _centre(dest)
    with connector_at(url) as central:
        try:
            with central.load() as conn:
                known = rules.revoke_role(conn, role)
        except Exception as exc:
            refused = _refused(exc, "revoke roles")
            if refused is None:
                raise
            raise refused from None
    return RoleChange(role, None, known=known)
