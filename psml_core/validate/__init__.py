"""Validation of the simulator against real processes on shaped links (``psml validate``)."""
