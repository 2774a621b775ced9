-- changelake's own tables in a captured database: plain DDL (no psql commands), run by
-- capture.sql here and by `changelake connectors init` in any database it prepares.

-- The heartbeat the connector writes so its slot advances while the
-- captured tables are idle and the rest of the database is busy.
CREATE SCHEMA IF NOT EXISTS changelake;
CREATE TABLE IF NOT EXISTS changelake.heartbeat (
    id  int PRIMARY KEY,
    ts  timestamptz NOT NULL
);

-- Debezium's signal table: INSERT a row ('execute-snapshot', '{"data-collections": [...]}') to
-- snapshot a table added to the connector later, while streaming goes on (incremental snapshot).
CREATE TABLE IF NOT EXISTS changelake.debezium_signal (
    id    varchar(42) PRIMARY KEY,
    type  varchar(32) NOT NULL,
    data  varchar(2048)
);
