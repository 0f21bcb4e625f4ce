#!/usr/bin/env bash
# Builds the system's oneTBB version from Debian's source package with
# -fsanitize=thread into DEST/install, for `make sanitize`.
#
#   tests/reliability/tsan_onetbb.sh DEST
#
# Why: Debian's libtbb is not instrumented, so ThreadSanitizer cannot see the
# happens-before edges of TBB's task hand-offs (a worker's writes, the
# caller's reads after parallel_for returns) and reports every one of them:
# 3008 false reports over the cpu and reliability tests. Suppressing them
# would hide real races in our task bodies too. With an instrumented oneTBB
# the same tests report nothing. (docs/RELIABILITY.md §3)
#
# Works on a fresh Debian 12 machine as root: installs dpkg-dev (dpkg-source,
# which unpacks the source and applies Debian's patches) and xz-utils when
# missing, and fetches the source with apt-get through a private source list
# (deb-src lines for the release, -updates and -security), state and cache
# directory under DEST: the system's apt configuration and sources are not
# touched. Needs network access to deb.debian.org (like `make deps`).
# Idempotent: a finished build of the installed libtbb-dev version is reused
# (DEST/install/.version); anything else under DEST is rebuilt from scratch.
# About 1 minute on 2 cores.
set -euo pipefail
die() {
  echo "tsan_onetbb.sh: $*" >&2
  exit 1
}
[ $# -eq 1 ] && [ -n "$1" ] || die "usage: tsan_onetbb.sh DEST"
dest=$(mkdir -p "$1" && cd "$1" && pwd)

version=$(dpkg-query -W -f='${Version}' libtbb-dev 2>/dev/null) || true
[ -n "$version" ] || die "libtbb-dev is not installed (run make deps)"
upstream=${version#*:}      # no epoch
upstream=${upstream%-*}     # no Debian revision: 2021.8.0-2+deb12u1 -> 2021.8.0
if [ -f "$dest/install/lib/cmake/TBB/TBBConfig.cmake" ] && [ "$(cat "$dest/install/.version" 2>/dev/null)" = "$version" ]; then
  echo "oneTBB $version with ThreadSanitizer: $dest/install (already built)"
  exit 0
fi

# shellcheck disable=SC1091
codename=$(. /etc/os-release && [ "${ID:-}" = debian ] && echo "${VERSION_CODENAME:-}") || true
[ -n "$codename" ] || die "not a Debian system (/etc/os-release): build oneTBB $upstream with -DTBB_SANITIZE=thread yourself and pass -DTBB_DIR to cmake"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -f "$keyring" ] || die "$keyring is missing (apt-get install debian-archive-keyring)"

need=()
command -v dpkg-source >/dev/null || need+=(dpkg-dev)
command -v xz >/dev/null || need+=(xz-utils)
for tool in cmake ninja g++; do command -v "$tool" >/dev/null || die "$tool not found (run make deps)"; done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || die "needs ${need[*]}: apt-get install ${need[*]} (as root)"
  echo "tsan_onetbb.sh: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# A private apt: its own source list, lists, cache; the system's stay as they are.
apt_dir="$dest/apt"
rm -rf "$apt_dir" "$dest/src" "$dest/build" "$dest/install"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$dest/src"
cat >"$apt_dir/sources" <<EOF
deb-src [signed-by=$keyring] http://deb.debian.org/debian $codename main
deb-src [signed-by=$keyring] http://deb.debian.org/debian $codename-updates main
deb-src [signed-by=$keyring] http://deb.debian.org/debian-security $codename-security main
EOF
apt_opts=(-qq -o "Dir::Etc::SourceList=$apt_dir/sources" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update >"$dest/apt.log" 2>&1 ||
  { tail -5 "$dest/apt.log" >&2; die "apt-get update of the deb-src lists for $codename failed (network? see $dest/apt.log)"; }
# The installed revision; if the archive has moved on, its current revision of
# the same upstream version (same sources up to Debian's patches).
if ! (cd "$dest/src" && apt-get "${apt_opts[@]}" source "onetbb=$version" >>"$dest/apt.log" 2>&1); then
  echo "tsan_onetbb.sh: onetbb $version is no longer in the archive; trying its current revision" >&2
  rm -rf "$dest/src" && mkdir -p "$dest/src"
  (cd "$dest/src" && apt-get "${apt_opts[@]}" source onetbb >>"$dest/apt.log" 2>&1) ||
    { tail -5 "$dest/apt.log" >&2; die "apt-get source onetbb failed (see $dest/apt.log)"; }
fi
src="$dest/src/onetbb-$upstream"
[ -f "$src/CMakeLists.txt" ] ||
  die "no $src after apt-get source (the archive has: $(cd "$dest/src" && ls -d onetbb-*/ 2>/dev/null | tr '\n' ' ')); installed libtbb-dev is $version"

step() {  # step NAME COMMAND...: output to DEST/NAME.log, its tail on failure
  local name=$1
  shift
  "$@" >"$dest/$name.log" 2>&1 || { tail -20 "$dest/$name.log" >&2; die "$name failed (see $dest/$name.log)"; }
}
step configure cmake -S "$src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread \
  -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=OFF -DTBBMALLOC_PROXY_BUILD=OFF \
  -DCMAKE_INSTALL_PREFIX="$dest/install"
step build cmake --build "$dest/build" -j "$(nproc)"
step install cmake --install "$dest/build"
echo "$version" >"$dest/install/.version"
echo "oneTBB $version with ThreadSanitizer: $dest/install"
