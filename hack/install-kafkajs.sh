#!/usr/bin/env bash
# Installs kafkajs for the interop suite (test/interop/js) with `npm ci` from the committed
# package-lock.json, first installing node and npm with apt-get when they are missing. The
# interop suite fails, rather than skips, without them.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "install-kafkajs: node or npm is missing and apt-get is not available; install Node.js (14 or later) and npm yourself" >&2
		exit 1
	fi
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	echo "install-kafkajs: installing nodejs and npm with apt-get" >&2
	$sudo apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq nodejs npm >/dev/null
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 14 ]; then
	echo "install-kafkajs: node $(node --version) is too old; kafkajs needs Node.js 14 or later" >&2
	exit 1
fi
npm ci --prefix test/interop/js --no-audit --no-fund --loglevel=error
