"""Alembic environment and versions for the store's schema (`store.schema.metadata`)."""
