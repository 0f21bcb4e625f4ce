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
# Uses apt-get with a private source list and state directory: the system's
# apt configuration is not touched. Needs network access to deb.debian.org
# (like `make deps`). About 1 minute on 2 cores; reused when DEST is kept.
set -euo pipefail
dest=$(mkdir -p "$1" && cd "$1" && pwd)
if [ -f "$dest/install/lib/cmake/TBB/TBBConfig.cmake" ]; then
  exit 0
fi
version=$(dpkg-query -W -f='${Version}' libtbb-dev)
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
mkdir -p "$dest/apt/lists/partial" "$dest/src"
cat >"$dest/apt/sources" <<EOF
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename-updates main
deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian-security $codename-security main
EOF
apt_opts=(-qq -o "Dir::Etc::SourceList=$dest/apt/sources" -o Dir::Etc::SourceParts=/dev/null
          -o "Dir::State::Lists=$dest/apt/lists" -o APT::Sandbox::User=root)
apt-get "${apt_opts[@]}" update
(cd "$dest/src" && apt-get "${apt_opts[@]}" source --download-only "onetbb=$version")
tar -xf "$dest"/src/onetbb_*.orig.tar.* -C "$dest/src"
src=$(ls -d "$dest"/src/oneTBB-*/ | head -1)
cmake -S "$src" -B "$dest/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTBB_SANITIZE=thread \
  -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=OFF -DTBBMALLOC_PROXY_BUILD=OFF \
  -DCMAKE_INSTALL_PREFIX="$dest/install" >"$dest/configure.log"
cmake --build "$dest/build" -j "$(nproc)" >"$dest/build.log"
cmake --install "$dest/build" >"$dest/install.log"
echo "oneTBB $version with ThreadSanitizer: $dest/install"
