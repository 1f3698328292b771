"""A running job's progress in the database: every server's page shows it.

The worker of a running job writes its stage (step of steps, the claims made
and checked) into its work folder; its server copies it into ``jobs.progress``
(JSON) when it changes, so a job's page is the same on every node. Cleared
when the job ends or goes back to the queue.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""
import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as b:
        b.add_column(sa.Column("progress", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as b:
        b.drop_column("progress")
