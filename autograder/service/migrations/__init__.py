"""Alembic's migrations of the service's database (``db.upgrade`` runs them; no alembic.ini needed)."""
