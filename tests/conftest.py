"""Shared fixtures: one Spark session and one Kafka broker per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from streamjoin.session import spark_session

    session = spark_session("streamjoin-tests")
    yield session
    session.stop()
