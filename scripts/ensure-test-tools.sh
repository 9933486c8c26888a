#!/usr/bin/env bash
# Debian packages the tests drive as real peers: promtool (prometheus), Alertmanager,
# VictoriaMetrics (the agent's remote-write receiver), and Chromium with its driver for the
# dashboard's browser tests. Installed only when missing.
set -euo pipefail
need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || need+=(prometheus-alertmanager)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
[ -x /usr/bin/victoria-metrics ] || need+=(victoria-metrics)
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
echo "installing test tools: ${need[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
  $SUDO apt-get update -q >/dev/null 2>&1
  $SUDO apt-get install -y -q --no-install-recommends "${need[@]}" >/dev/null
}
# The Debian packages start their services; the tests start their own on free ports.
for svc in prometheus prometheus-alertmanager prometheus-node-exporter victoria-metrics; do
  (command -v systemctl >/dev/null 2>&1 && $SUDO systemctl stop "$svc" >/dev/null 2>&1) || true
  (command -v service >/dev/null 2>&1 && $SUDO service "$svc" stop >/dev/null 2>&1) || true
done
