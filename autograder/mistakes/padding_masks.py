"""Placeholder: filled by the catalog work."""
