# Sourced by .ci/run and the Makefile: names the PostgreSQL and Redis the tests may use, when they
# answer on localhost. With start=1 it first starts an installed but stopped service with the
# machine's documented commands.
start="${start:-0}"

pg_up() { command -v pg_isready >/dev/null 2>&1 && pg_isready -q -h 127.0.0.1 -p 5432 -t 2; }
redis_up() { command -v redis-cli >/dev/null 2>&1 && [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

if [ "$start" = 1 ]; then
  if ! pg_up && command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "services: starting PostgreSQL" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start >&2 || true
    for _ in $(seq 1 20); do pg_up && break; sleep 0.5; done
  fi
  # The standby tests (core/store/postgres/pgtest.StartStandby) copy the server with
  # pg_basebackup, a replication connection, which a rule for "all" databases does not cover.
  # Only a server that already trusts every connection from 127.0.0.1 gets the same for them.
  for hba in /etc/postgresql/*/main/pg_hba.conf; do
    if [ -w "$hba" ] && pg_up && grep -Eq '^[[:space:]]*host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba" &&
      ! grep -Eq '^[[:space:]]*host[[:space:]]+replication[[:space:]]' "$hba"; then
      echo "services: allowing replication connections from 127.0.0.1 in $hba" >&2
      printf 'host replication all 127.0.0.1/32 trust\n' >>"$hba"
      pg_ctlcluster --skip-systemctl-redirect "$(basename "$(dirname "$(dirname "$hba")")")" main reload >&2 || true
    fi
  done
  if ! redis_up && command -v redis-server >/dev/null 2>&1; then
    echo "services: starting Redis" >&2
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log >&2 || true
    for _ in $(seq 1 20); do redis_up && break; sleep 0.5; done
  fi
fi

if [ -z "${CALLWIRE_TEST_DATABASE_URL:-}" ] && pg_up; then
  export CALLWIRE_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
fi
if [ -z "${CALLWIRE_TEST_REDIS_URL:-}" ] && redis_up; then
  export CALLWIRE_TEST_REDIS_URL="redis://127.0.0.1:6379/0"
fi
echo "services: postgres=${CALLWIRE_TEST_DATABASE_URL:-none} redis=${CALLWIRE_TEST_REDIS_URL:-none}" >&2
