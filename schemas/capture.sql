-- What Debezium needs, and no more: a login role with REPLICATION (not superuser), SELECT on the
-- captured schemas, write access to the heartbeat table only, and a publication created here so
-- the connector never needs table ownership (`publication.autocreate.mode=disabled`).
--
-- Run as a superuser with psql, after shop.sql (`changelake connectors init` does the same for
-- any other database):
--   psql -v debezium_password=... -v publication=changelake_shop -f schemas/capture.sql
-- (`changelake stack up` and the compose Postgres init script both do exactly that.)

\set ON_ERROR_STOP on

-- The heartbeat and signal tables.
\ir changelake.sql

SELECT format('CREATE ROLE debezium LOGIN REPLICATION PASSWORD %L', :'debezium_password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'debezium') \gexec
ALTER ROLE debezium WITH LOGIN REPLICATION NOSUPERUSER NOCREATEDB NOCREATEROLE
    PASSWORD :'debezium_password';

SELECT format('GRANT CONNECT ON DATABASE %I TO debezium', current_database()) \gexec
GRANT USAGE ON SCHEMA public, changelake TO debezium;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO debezium;
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO debezium;
GRANT SELECT, INSERT, UPDATE ON changelake.heartbeat TO debezium;
-- Incremental snapshots write their window markers into the signal table.
GRANT SELECT, INSERT, UPDATE, DELETE ON changelake.debezium_signal TO debezium;

-- Every table in these schemas is published; the connector's table.include.list chooses which
-- ones it captures, so adding a table needs no change here.
SELECT format('CREATE PUBLICATION %I FOR TABLES IN SCHEMA public, changelake', :'publication')
WHERE NOT EXISTS (SELECT FROM pg_publication WHERE pubname = :'publication') \gexec
