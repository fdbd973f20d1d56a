"""Fixtures for the real servers some tests need (Redis, ...), registered in tests/conftest.py."""
