"""io-harness 0.21: a run's todo list, and questions put to a person.

`todos` holds the agent's list in `position` order (rewritten as a whole). `pending_questions`
works like `pending_approvals`: the answer stays NULL until someone answers, and `answered_by`
tells a machine from a person.

Revision ID: 0.21
Revises: 0.20
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
from harness_store.sqldefaults import stamp_now

revision = "0.21"
down_revision = "0.20"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table(
        "todos",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("position", INT, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("written_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_table(
        "pending_questions",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("context", sa.Text()),
        sa.Column("choices", sa.Text()),
        sa.Column("answer", sa.Text()),
        sa.Column("answered_by", sa.Text()),
        sa.Column("resolved", INT, nullable=False, server_default=sa.text("0")),
        sa.Column("asked_at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("todos_run", "todos", ["run_id", "position"])


def downgrade() -> None:
    drop_index("todos_run", "todos")
    drop_table("pending_questions")
    drop_table("todos")
