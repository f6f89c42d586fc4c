"""io-harness 0.56: memory recalls indexed by entry.

Memory eviction now ranks entries by how often they were recalled, so it reads
`memory_recalls` by (workspace, key) when writing; this index serves that read.

Release 0.57 changed no schema: its name is this revision's branch label, so `alembic upgrade
0.57` lands here.

Revision ID: 0.56
Revises: 0.51
"""

from __future__ import annotations

from harness_store.schema.migration_ops import create_index, drop_index
from harness_store.schema.release_labels import labels_for

revision = "0.56"
down_revision = "0.51"
branch_labels = labels_for(revision)
depends_on = None


def upgrade() -> None:
    create_index("memory_recalls_entry", "memory_recalls", ["workspace", "key"])


def downgrade() -> None:
    drop_index("memory_recalls_entry", "memory_recalls")
