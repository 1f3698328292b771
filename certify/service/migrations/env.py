"""Alembic environment: the connection is handed in by :func:`certify.service.schema.migrate`."""

from alembic import context

from certify.service.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through certify.service.schema.migrate(engine)")
context.configure(connection=connection, target_metadata=Base.metadata,
                  render_as_batch=connection.dialect.name == "sqlite")
with context.begin_transaction():
    context.run_migrations()
