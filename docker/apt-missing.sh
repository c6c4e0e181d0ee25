#!/bin/sh
# Install the packages LIST names that the base does not hold yet, then drop apt's lists.
# A base that already holds them all (the tests import one from the host's own packages,
# tests/host_image.py) fetches nothing: no registry is needed.
#
#   sh docker/apt-missing.sh LIST
set -eu
missing=""
for package in $(sed 's/#.*//' "$1"); do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $package"
done
if [ -z "$missing" ]; then
    echo "apt-missing: every package of $1 is installed"
    exit 0
fi
echo "apt-missing: installing$missing"
apt-get update -qq
# shellcheck disable=SC2086  # one word per package
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
rm -rf /var/lib/apt/lists/*
