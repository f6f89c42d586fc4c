"""io-harness 0.58: session turns indexed by session.

Retention sweeps read the turns of every session; this index on `session_id` serves them.

Release 0.59 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.59` lands here.

Revision ID: 0.58
Revises: 0.56
"""

from __future__ import annotations

from harness_store.schema.migration_ops import create_index, drop_index
from harness_store.schema.release_labels import labels_for

revision = "0.58"
down_revision = "0.56"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_index("session_turns_session", "session_turns", ["session_id"])


def downgrade() -> None:
    drop_index("session_turns_session", "session_turns")
