# The changelake pipeline image: the `changelake` command (PySpark jobs, connector registration,
# status/query/verify) with Java 17 and the Spark extras pinned in pom.xml.
#
#   docker build -t changelake:local .          (docker compose builds it as changelake:local)
#   docker run --rm changelake:local --help
#
# Plain Dockerfile syntax only (no BuildKit-only features), so the legacy builder behind
# docker-compose 1.29 builds it too.

# --- Stage 1: the Spark extras (delta-spark, spark-sql-kafka, ...) exactly as pom.xml pins them.
FROM maven:3.9.9-eclipse-temurin-17 AS jars
WORKDIR /build
COPY pom.xml ./
COPY .mvn/settings.xml .mvn/settings.xml
RUN mvn -q -B -s .mvn/settings.xml -P spark dependency:copy-dependencies \
        -DoutputDirectory=/opt/changelake/vendor/spark \
    && ls /opt/changelake/vendor/spark/*.jar > /dev/null

# --- Stage 2: the runtime.
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# Java 17 from Debian (PySpark 4 needs 17+); procps because Spark's launch scripts call `ps`.
# /usr/lib/jvm/java-17 points at the JVM whatever the CPU architecture is.
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless procps; \
    rm -rf /var/lib/apt/lists/*; \
    ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /usr/lib/jvm/java-17; \
    /usr/lib/jvm/java-17/bin/java -version
ENV JAVA_HOME=/usr/lib/jvm/java-17

# Dependencies first, from the lock file alone (every package at the version the tests ran
# with), so a code change does not reinstall PySpark.
COPY requirements.lock /tmp/changelake-deps/requirements.lock
RUN pip install -r /tmp/changelake-deps/requirements.lock && rm -rf /tmp/changelake-deps

# The package itself (README.md is optional here: the glob copies it when it exists).
COPY pyproject.toml README.m[d] /tmp/changelake-src/
COPY changelake /tmp/changelake-src/changelake
RUN pip install --no-deps /tmp/changelake-src \
    && rm -rf /tmp/changelake-src \
    && changelake --help > /dev/null

COPY --from=jars /opt/changelake/vendor/spark /opt/changelake/vendor/spark

# settings.project_root() is the working directory when pom.xml is not next to the package:
# /app holds pom.xml (versions), connectors/ and schemas/ (compose mounts ./connectors over the
# copy, so edits need no rebuild).
WORKDIR /app
COPY pom.xml ./
COPY connectors ./connectors
COPY schemas ./schemas

RUN set -eux; \
    useradd --system --uid 10001 --user-group --create-home --home-dir /home/changelake \
        --shell /usr/sbin/nologin changelake; \
    mkdir -p /var/lib/changelake; \
    chown changelake:changelake /var/lib/changelake

ENV CHANGELAKE_VENDOR=/opt/changelake/vendor \
    CHANGELAKE_HOME=/var/lib/changelake

# Starts as root only to hand a bind-mounted lake folder to `changelake`, then runs the command
# as that user (setpriv is util-linux's, in every Debian image).
COPY docker/pipeline-entrypoint.sh /usr/local/bin/changelake-entrypoint
ENTRYPOINT ["/usr/local/bin/changelake-entrypoint"]
CMD ["run"]
