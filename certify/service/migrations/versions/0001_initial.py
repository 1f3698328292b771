"""Initial schema: jobs (the persistent queue), certificates, claims.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("command", sa.String(32), nullable=False),
        sa.Column("options", sa.Text, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("started_at", TS),
        sa.Column("finished_at", TS),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("upload_name", sa.String(255)),
        sa.Column("upload_sha256", sa.String(64)),
        sa.Column("upload_storage", sa.String(80)),
        sa.Column("exit_code", sa.Integer),
        sa.Column("cert_sha256", sa.String(64)),
        sa.Column("result", sa.Text),
    )
    op.create_index("ix_jobs_status", "jobs", ["status"])
    op.create_index("ix_jobs_created_at", "jobs", ["created_at"])
    op.create_table(
        "certificates",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(200), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("family_sha256", sa.String(64)),
        sa.Column("model_sha256", sa.String(64)),
        sa.Column("rank", sa.Integer),
        sa.Column("created_at", TS),
        sa.Column("stored_at", TS, nullable=False),
        sa.Column("source_name", sa.String(255)),
        sa.Column("source_sha256", sa.String(64)),
        sa.Column("command", sa.String(32), nullable=False),
        sa.Column("job_id", sa.String(32)),
        sa.Column("json_text", sa.Text, nullable=False),
        sa.Column("verification", sa.Text),
        sa.Column("verify_exit", sa.Integer),
        sa.Column("verify_mode", sa.String(200)),
    )
    for col in ("kind", "verdict", "family_sha256", "model_sha256", "rank", "created_at",
                "stored_at"):
        op.create_index(f"ix_certificates_{col}", "certificates", [col])
    op.create_table(
        "claims",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("cert_sha256", sa.String(64),
                  sa.ForeignKey("certificates.sha256", ondelete="CASCADE"), nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("rank", sa.Integer),
        sa.Column("family_sha256", sa.String(64)),
    )
    op.create_index("ix_claims_cert_sha256", "claims", ["cert_sha256"])
    op.create_index("ix_claims_kind", "claims", ["kind"])


def downgrade() -> None:
    op.drop_table("claims")
    op.drop_table("certificates")
    op.drop_table("jobs")
