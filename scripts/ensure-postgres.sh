#!/usr/bin/env bash
# Start the local PostgreSQL cluster if nothing answers on 127.0.0.1:5432 (tests need it).
set -euo pipefail
ready() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null || python3 - <<'PY'
import socket, sys
s = socket.socket(); s.settimeout(1)
sys.exit(0 if s.connect_ex(("127.0.0.1", 5432)) == 0 else 1)
PY
}
if ready; then exit 0; fi
echo "PostgreSQL is not answering on 127.0.0.1:5432; starting it" >&2
if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
  for version in $(ls /etc/postgresql); do
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  done
fi
for _ in $(seq 1 30); do
  if ready; then exit 0; fi
  sleep 1
done
echo "PostgreSQL did not come up on 127.0.0.1:5432" >&2
exit 1
