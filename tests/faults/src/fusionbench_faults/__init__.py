"""Fault-injection backends for the reliability tests (tests/integration/test_faults.py)."""
