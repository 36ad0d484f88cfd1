#!/usr/bin/env bash
# Installs Debian packages, as root or through sudo, quietly: the one way every script here
# (install-deps.sh, fuzz/run.sh, tests/run_valgrind.sh) installs what a fresh machine lacks.
#   bash tools/apt-install.sh WHO PACKAGE...     (WHO names the caller in messages)
set -euo pipefail
who=$1
shift
echo "$who: installing $*"
sudo=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "$who: need root to install $*" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
