#!/usr/bin/env bash
# Fetches Redis' own test suite: Debian's source package of the installed redis-server's
# exact version (apt-get source redis=<version>; needs the deb-src entry that
# scripts/install-deps.sh adds), unpacked once into a cache folder.  Prints the path of the
# unpacked source tree (it holds runtest and tests/unit/) on stdout.
#
#   tests/kv/redis_suite/fetch.sh            # cache: $CONDUIT_REDIS_SRC_CACHE or ~/.cache/conduit-redis
set -euo pipefail

version=$(dpkg-query -W -f='${Version}' redis-server 2>/dev/null || true)
if [[ -z $version ]]; then
  echo "redis_suite/fetch: redis-server is not installed (apt-get install redis-server)" >&2
  exit 1
fi
cache=${CONDUIT_REDIS_SRC_CACHE:-${HOME:-/root}/.cache/conduit-redis}
dir=$cache/${version//[:~]/_}
upstream=${version#*:}
upstream=${upstream%%-*}
tree=$dir/redis-$upstream
if [[ -x $tree/runtest && -d $tree/tests/unit ]]; then
  echo "$tree"
  exit 0
fi
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
echo "redis_suite/fetch: apt-get source redis=$version into $dir" >&2
if ! (cd "$dir.tmp" && apt-get source -qq "redis=$version" >&2); then
  echo "redis_suite/fetch: apt-get source failed; is there a deb-src entry (scripts/install-deps.sh adds one) and was apt-get update run?" >&2
  rm -rf "$dir.tmp"
  exit 1
fi
if [[ ! -x $dir.tmp/redis-$upstream/runtest ]]; then
  echo "redis_suite/fetch: no redis-$upstream/runtest in the source package" >&2
  exit 1
fi
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "$tree"
