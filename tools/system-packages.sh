#!/usr/bin/env bash
# The two Debian packages `make test` needs beside Python: Graphviz (`dot` lays out the report's diagram) and
# Chromium (the report's and the PR diagram's browser tests). Installed with apt when missing (as root, or through
# sudo); without either, the command to run is printed and the step fails, since those tests fail rather than skip.
set -euo pipefail
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ "${#missing[@]}" -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo"
else
  echo "make test needs ${missing[*]}: sudo apt-get install --no-install-recommends ${missing[*]}" >&2
  exit 1
fi
echo "installing ${missing[*]} (apt)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
