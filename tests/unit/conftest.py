"""What the unit tests share: a local Spark session, and no services."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from changelake.settings import load_settings
from changelake.spark import session


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    # get-or-create: shares the integration tests' session when both run in one pytest.
    return session(load_settings(), app="changelake-unit")
