"""io-harness 0.43: summaries of folded context.

When the context is folded, the summary text is kept in `summaries`, keyed by the step that
triggered it, so a resumed run reuses it instead of paying for it again.

Releases 0.44 … 0.50 changed no schema: their names are this revision's branch labels, so
`alembic upgrade 0.50` lands here.

Revision ID: 0.43
Revises: 0.37
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import (
    INT,
    create_index,
    create_table,
    drop_index,
    drop_table,
    id_column,
)
from harness_store.schema.release_labels import labels_for
from harness_store.sqldefaults import stamp_now

revision = "0.43"
down_revision = "0.37"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "summaries",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("through_step", INT, nullable=False),
        sa.Column("folded", INT, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("est_tokens", INT, nullable=False, server_default=sa.text("0")),
        sa.Column("at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("summaries_run", "summaries", ["run_id", "folded"])


def downgrade() -> None:
    drop_index("summaries_run", "summaries")
    drop_table("summaries")
