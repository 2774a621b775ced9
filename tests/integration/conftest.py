from tests.integration.pipeline_fixtures import pipeline, spark  # noqa: F401 (fixtures)
