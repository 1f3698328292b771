"""Leases and blobs: the queue shared by any number of servers.

Jobs carry their live claim (id, node, lease end in database epoch seconds)
and whether they were submitted without the token; every claim is recorded in
``job_claims``; uploads and a certificate's report files live in the database
(``uploads``, ``certificate_files``), so any node can run any job and serve
any result.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as b:
        b.add_column(sa.Column("claim_id", sa.String(32)))
        b.add_column(sa.Column("node_id", sa.String(32)))
        b.add_column(sa.Column("lease_until", sa.Float))
        b.add_column(sa.Column("anonymous", sa.Boolean, nullable=False, server_default=sa.false()))
        b.add_column(sa.Column("upload_size", sa.BigInteger))
    op.create_index("ix_jobs_claim_id", "jobs", ["claim_id"])
    op.create_index("ix_jobs_lease_until", "jobs", ["lease_until"])
    with op.batch_alter_table("certificates") as b:
        b.add_column(sa.Column("size", sa.BigInteger))
    op.create_table(
        "job_claims",
        sa.Column("claim_id", sa.String(32), primary_key=True),
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("node_id", sa.String(32), nullable=False),
        sa.Column("claimed_at", sa.Float, nullable=False),
        sa.Column("ended_at", sa.Float),
        sa.Column("outcome", sa.String(16)),
    )
    op.create_index("ix_job_claims_job_id", "job_claims", ["job_id"])
    op.create_index("ix_job_claims_node_id", "job_claims", ["node_id"])
    op.create_table(
        "uploads",
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "certificate_files",
        sa.Column("cert_sha256", sa.String(64),
                  sa.ForeignKey("certificates.sha256", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.String(120), primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("data", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("certificate_files")
    op.drop_table("uploads")
    op.drop_table("job_claims")
    op.drop_index("ix_jobs_lease_until", "jobs")
    op.drop_index("ix_jobs_claim_id", "jobs")
    with op.batch_alter_table("certificates") as b:
        b.drop_column("size")
    with op.batch_alter_table("jobs") as b:
        for c in ("upload_size", "anonymous", "lease_until", "node_id", "claim_id"):
            b.drop_column(c)
