#!/usr/bin/env bash
# Postgres container init (runs once, on an empty data volume, from /docker-entrypoint-initdb.d):
# the demo schema, then what Debezium needs (role, grants, publication) — the same two files, run
# the same way, as `changelake stack up` does locally.
#
# Expects (from docker-compose.yml): POSTGRES_USER and POSTGRES_DB (the superuser and database the
# image created), CHANGELAKE_DEBEZIUM_PASSWORD, CHANGELAKE_PUBLICATION, and schemas/ mounted
# read-only at /changelake/schemas. The image's entrypoint may run this file or source it, so it
# changes no shell options and only exits on error.

changelake_schemas=/changelake/schemas

if [ -z "${CHANGELAKE_DEBEZIUM_PASSWORD:-}" ]; then
    echo "changelake init: CHANGELAKE_DEBEZIUM_PASSWORD is empty; set it in .env (see .env.example)" >&2
    exit 1
fi
for sql in shop.sql capture.sql; do
    if [ ! -r "$changelake_schemas/$sql" ]; then
        echo "changelake init: $changelake_schemas/$sql is missing; is ./schemas mounted?" >&2
        exit 1
    fi
done

echo "changelake init: applying shop.sql and capture.sql to database ${POSTGRES_DB}"
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -f "$changelake_schemas/shop.sql" || exit 1
psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v debezium_password="$CHANGELAKE_DEBEZIUM_PASSWORD" \
    -v publication="${CHANGELAKE_PUBLICATION:-changelake_shop}" \
    -f "$changelake_schemas/capture.sql" || exit 1
unset changelake_schemas sql
