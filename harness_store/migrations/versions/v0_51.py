"""io-harness 0.51: an edit's diff, and the step a rewind undid.

`edits.hunk` holds the unified diff of an edit (NULL when unknown); `rewinds.undid_step` marks
a single-step undo (NULL: the whole run was rewound). Both are added by `ALTER TABLE`.

Releases 0.52 … 0.55 changed no schema: their names are this revision's branch labels, so
`alembic upgrade 0.55` lands here.

Revision ID: 0.51
Revises: 0.43
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, add_columns, drop_columns
from harness_store.schema.release_labels import labels_for

revision = "0.51"
down_revision = "0.43"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    add_columns(
        "edits",
        sa.Column("hunk", sa.Text()),
    )
    add_columns(
        "rewinds",
        sa.Column("undid_step", INT),
    )


def downgrade() -> None:
    drop_columns("rewinds", "undid_step")
    drop_columns("edits", "hunk")
