"""`harness-store roles`: a PostgreSQL centre's follower and reader roles, made, brought up to
date or taken back by its owner."""

from __future__ import annotations

from typing import Annotated

import typer

from .app import EXIT_USAGE, CliError, DbArg, SchemaOpt, app
from .output import visible
from .reader import in_schema


@app.command("roles")
def roles_command(
    dest: DbArg,
    follower: Annotated[
        str | None,
        typer.Option(
            "--follower",
            metavar="NAME",
            help="Make (or bring up to date) a login role that may sync and follow its own "
            "origins and nothing else.",
        ),
    ] = None,
    reader: Annotated[
        str | None,
        typer.Option(
            "--reader",
            metavar="NAME",
            help="Make (or bring up to date) a login role that reads everything and writes "
            "nothing.",
        ),
    ] = None,
    revoke: Annotated[
        str | None,
        typer.Option(
            "--revoke", metavar="NAME", help="Take back every right NAME has on the centre."
        ),
    ] = None,
    origin: Annotated[
        str | None,
        typer.Option(
            "--origin",
            metavar="UUID",
            help="With --follower: bind this origin (and the runs it sent) to the follower.",
        ),
    ] = None,
    schema: SchemaOpt = None,
) -> None:
    """Make the roles of the PostgreSQL centre DEST, run as its owner: a follower writes only
    the origins it syncs first (or is given with --origin), a reader only reads. PostgreSQL
    enforces it (grants, row-level security), whatever SQL the role sends."""
    from ..sync.roles import grant
    from ..sync.roles import revoke as take_back

    dest = in_schema(dest, schema)
    chosen = [o for o in (follower, reader, revoke) if o is not None]
    if len(chosen) != 1:
        raise CliError(EXIT_USAGE, "give exactly one of --follower, --reader, --revoke")
    if origin is not None and follower is None:
        raise CliError(EXIT_USAGE, "--origin goes with --follower")
    if revoke is not None:
        done = take_back(dest, revoke)
        said = "revoked" if done.known else "was no role of this centre; nothing left to revoke"
        typer.echo(f"{visible(revoke)}: {said}")
        return
    name, kind = (follower, "follower") if follower is not None else (reader, "reader")
    assert name is not None
    change = grant(dest, name, kind, origin)  # type: ignore[arg-type]
    bound = f", origin {change.origin} bound to it" if change.origin else ""
    typer.echo(f"{visible(name)}: {kind}{bound}")
