#!/bin/sh
# The pipeline image's entrypoint: `changelake "$@"` as the unprivileged user `changelake`.
#
# Started as root (compose's default), it first hands the state folders to that user: a lake
# bind-mounted from the host (docker-compose.yml, so engines on the host can read it) is created
# by the Docker engine as root when the host folder does not exist yet, and the pipeline could
# not write it. Only those folders themselves change owner, never what the user put inside.
set -eu
if [ "$(id -u)" = 0 ]; then
    for folder in "${CHANGELAKE_HOME:-/var/lib/changelake}" "${CHANGELAKE_LAKE:-${CHANGELAKE_HOME:-/var/lib/changelake}/lake}"; do
        if [ -d "$folder" ]; then
            chown changelake:changelake "$folder"
        fi
    done
    export HOME=/home/changelake
    exec setpriv --reuid=changelake --regid=changelake --init-groups -- changelake "$@"
fi
exec changelake "$@"
