"""io-harness 0.34: verification gate attempts.

Each evaluation of a gate phase is kept in `gate_attempts` with its outcome and detail,
where earlier releases discarded it.

Release 0.35 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.35` lands here.

Revision ID: 0.34
Revises: 0.33
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

revision = "0.34"
down_revision = "0.33"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_table(
        "gate_attempts",
        id_column(),
        sa.Column("run_id", INT, nullable=False),
        sa.Column("step", INT, nullable=False),
        sa.Column("phase", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False, server_default=sa.text("''")),
        sa.Column("at", sa.Text(), nullable=False, server_default=stamp_now()),
    )
    create_index("gate_attempts_run", "gate_attempts", ["run_id", "id"])


def downgrade() -> None:
    drop_index("gate_attempts_run", "gate_attempts")
    drop_table("gate_attempts")
