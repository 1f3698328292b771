"""Admission decided in the database: quotas that hold under concurrency.

Every submission is admitted inside one write transaction that holds the
``admission`` row (PostgreSQL: ``SELECT ... FOR UPDATE``; SQLite: the whole
database, ``BEGIN IMMEDIATE``) while it counts and inserts. Jobs record the
submitting client's address and the database's clock at submission (the
per-client rate window), the bytes reserved for their result while they live,
and the bytes their result holds once they ended (counted against
``--max-storage-mb`` until the job expires, ``--retention-days``).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as b:
        b.add_column(sa.Column("client", sa.String(64)))
        b.add_column(sa.Column("created_epoch", sa.Float))
        b.add_column(sa.Column("reserved_bytes", sa.BigInteger, nullable=False, server_default="0"))
        b.add_column(sa.Column("result_bytes", sa.BigInteger, nullable=False, server_default="0"))
    op.create_index("ix_jobs_client_created", "jobs", ["client", "created_epoch"])
    op.create_index("ix_jobs_finished_at", "jobs", ["finished_at"])
    # the bytes an ended job already holds (its result and reason), so the
    # storage figure is right from the first start after the upgrade
    op.execute("UPDATE jobs SET result_bytes = COALESCE(LENGTH(result), 0) "
               "+ COALESCE(LENGTH(reason), 0) + LENGTH(options)")
    t = op.create_table("admission", sa.Column("id", sa.Integer, primary_key=True))
    op.bulk_insert(t, [{"id": 1}])


def downgrade() -> None:
    op.drop_table("admission")
    op.drop_index("ix_jobs_finished_at", "jobs")
    op.drop_index("ix_jobs_client_created", "jobs")
    with op.batch_alter_table("jobs") as b:
        for c in ("result_bytes", "reserved_bytes", "created_epoch", "client"):
            b.drop_column(c)
