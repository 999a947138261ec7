"""Shared machinery for both wings: precision, memory, checkpoints, progress, seeding."""
