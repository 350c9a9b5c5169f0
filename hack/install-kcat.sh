#!/usr/bin/env bash
# Installs kcat (the e2e suite's command-line Kafka client) with apt-get when it is not on
# PATH. The e2e suite fails, rather than skips, without it.
set -euo pipefail
if command -v kcat >/dev/null 2>&1; then
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-kcat: kcat is missing and apt-get is not available; install kcat (librdkafka's CLI) yourself" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	sudo="sudo"
fi
echo "install-kcat: installing kcat with apt-get" >&2
$sudo apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq kcat >/dev/null
command -v kcat
