"""io-harness 0.2: the full step trace — prompt, tool call and tokens on every step.

With them a step says what the model was asked, what it called and what it cost, which is what
a token budget restored on resume is summed from. Added by `ALTER TABLE … ADD COLUMN` with
upstream's defaults ('' and 0), so 0.1 rows read as steps that recorded none.

Revision ID: 0.2
Revises: 0.1
"""

from __future__ import annotations

import sqlalchemy as sa

from harness_store.schema.migration_ops import INT, add_columns, drop_columns

revision = "0.2"
down_revision = "0.1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns(
        "steps",
        sa.Column("prompt", sa.Text(), nullable=False, server_default=sa.text("''")),
        sa.Column("tool_call", sa.Text(), nullable=False, server_default=sa.text("''")),
        sa.Column("tokens", INT, nullable=False, server_default=sa.text("0")),
    )


def downgrade() -> None:
    drop_columns("steps", "tokens", "tool_call", "prompt")
