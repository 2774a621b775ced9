# The Kafka Connect worker for docker compose: Debezium's image plus changelake's own Connect
# plugins (connect-smt/: the transformation dev.changelake.connect.KeyTruncates and the converter
# dev.changelake.connect.LeanJsonConverter), which the connectors in connectors/*.json name.
#
#   docker build -f docker/connect.Dockerfile -t changelake/connect:<debezium.version> .
#   (docker compose builds it, passing DEBEZIUM_VERSION from docker-compose.yml)
#
# The build context is the repository root (see .dockerignore). Plain Dockerfile syntax only (no
# BuildKit-only features), so the legacy builder behind docker-compose 1.29 builds it too.

# Default = pom.xml's <debezium.version> (tests/unit/test_compose.py checks that).
ARG DEBEZIUM_VERSION=3.7.0.Final

# --- Stage 1: build the plugins exactly as `changelake setup` does (mvn -P smt package).
FROM maven:3.9.9-eclipse-temurin-17 AS smt
WORKDIR /build
COPY pom.xml ./
COPY .mvn/settings.xml .mvn/settings.xml
COPY connect-smt/pom.xml connect-smt/pom.xml
COPY connect-smt/src connect-smt/src
RUN mvn -q -B -s .mvn/settings.xml -P smt package -DskipTests \
    && mkdir -p /out/changelake-smt \
    && cp connect-smt/target/changelake-connect-smt-*.jar /out/changelake-smt/ \
    && ls /out/changelake-smt/*.jar > /dev/null

# --- Stage 2: Debezium's Connect image. Its plugin path (KAFKA_CONNECT_PLUGINS_DIR, and so
# CONNECT_PLUGIN_PATH) is /kafka/connect, one child folder per plugin; the jar gets its own
# folder, named as in the local stack (<vendor>/plugins/changelake-smt).
FROM quay.io/debezium/connect:${DEBEZIUM_VERSION}
COPY --from=smt /out/changelake-smt/ /kafka/connect/changelake-smt/
