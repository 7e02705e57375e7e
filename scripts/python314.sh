#!/usr/bin/env bash
# CPython 3.14 from Debian's packages, without installing anything: the Lambda layer's
# bytecode is compiled by it (infra/layer.py), and `make rehearsal-arm64` runs the
# handlers on its arm64 build under qemu.
#
#   scripts/python314.sh [ARCH]    ARCH: amd64 or arm64 (default: this machine's)
#
# Prints the path of a launcher that runs the interpreter for ARCH; builds it on first use
# under build/py314/ (MEMVAULT_PY314_DIR), about 15 MB of packages per architecture.
#
# How: a private apt configuration (its own sources list, lists and cache under
# build/py314/apt: the system's sources, preferences and dpkg database are neither read
# nor changed, so nothing here can upgrade this machine) names Debian's unstable suite
# (MEMVAULT_PY314_SUITE, default sid: the suite that has python3.14) and bookworm (for
# qemu-user-static). `apt-get download` fetches python3.14 and the libraries it links,
# glibc included, and `dpkg-deb -x` unpacks them into build/py314/<arch>/root. That
# glibc is newer than bookworm's, so the launcher runs python3.14 through the unpacked
# dynamic loader with the unpacked libraries only (--inhibit-cache); for another
# architecture, through qemu-<arch>-static (bookworm's qemu-user-static, unpacked the same
# way) with the unpacked root as its prefix (-L). The unpacked standard library is then
# compiled once, as a Debian install would do (its packages ship no bytecode).
#
# MEMVAULT_PYTHON314: a python3.14 of this machine's architecture to use instead (checked,
# never downloaded). Anything missing (no apt-get or dpkg-deb, no network, no python3.14
# in the suite) fails with a message: the layer build never ships without bytecode
# unless MEMVAULT_LAYER_NO_BYTECODE=1 says so (see infra/layer.py).
set -euo pipefail

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${MEMVAULT_PY314_DIR:-$root_dir/build/py314}"
suite="${MEMVAULT_PY314_SUITE:-sid}"
mirror="${MEMVAULT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

die() {
  echo "python314.sh: error: $*" >&2
  exit 1
}

command -v dpkg >/dev/null || die "needs dpkg (a Debian or Ubuntu machine); or set MEMVAULT_PYTHON314"
native="$(dpkg --print-architecture)"
arch="${1:-$native}"
case "$arch" in
  amd64) triplet=x86_64-linux-gnu loader=usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 qemu_arch=x86_64 ;;
  arm64) triplet=aarch64-linux-gnu loader=usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1 qemu_arch=aarch64 ;;
  *) die "unsupported architecture $arch (amd64 or arm64)" ;;
esac

works() { # the launcher runs, is 3.14 and has the modules the builds use
  [ -x "$1" ] && "$1" -c 'import sys, ssl, ctypes, compileall; assert sys.version_info[:2] == (3, 14)' 2>/dev/null
}

if [ -n "${MEMVAULT_PYTHON314:-}" ] && [ "$arch" = "$native" ]; then
  works "$MEMVAULT_PYTHON314" || die "MEMVAULT_PYTHON314=$MEMVAULT_PYTHON314 is not a working python3.14"
  echo "$MEMVAULT_PYTHON314"
  exit 0
fi

dest="$out/$arch"
launcher="$dest/root/usr/bin/python3.14-launcher"
if works "$launcher"; then
  echo "$launcher"
  exit 0
fi

# The standard library's bytecode is compiled by this machine's python3.14 (the same
# bytecode for any architecture): for another architecture, that one is made first.
compiler="$launcher"
if [ "$arch" != "$native" ]; then
  compiler="$("$0" "$native")" || exit 1
fi

# One build at a time (synths and test sessions may start side by side); whoever waited
# finds the interpreter ready.
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9
if works "$launcher"; then
  echo "$launcher"
  exit 0
fi

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
  die "needs apt-get and dpkg-deb to fetch Debian's python3.14; or set MEMVAULT_PYTHON314"
[ -r "$keyring" ] || die "no Debian archive keyring at $keyring (apt-get install debian-archive-keyring)"

# The interpreter, the libraries its binary and its standard library's extension modules
# link (libpython3.14-stdlib's Depends, less data packages: tzdata, netbase, media-types),
# and glibc with libgcc_s (which glibc loads for thread cancellation).
packages=(
  python3.14-minimal libpython3.14-minimal libpython3.14-stdlib
  libc6 libgcc-s1 libexpat1 zlib1g libssl3t64 libffi8 libbz2-1.0 liblzma5 libzstd1
  libsqlite3-0 libuuid1 libncursesw6 libtinfo6 libreadline8t64 libdb5.3t64
)

apt_dir="$out/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/parts"
touch "$apt_dir/status"
cat >"$apt_dir/sources.list" <<EOF
deb [signed-by=$keyring] $mirror $suite main
deb [signed-by=$keyring] $mirror bookworm main
EOF
apt_opts=(
  -o "Dir::Etc::SourceList=$apt_dir/sources.list"
  -o "Dir::Etc::SourceParts=$apt_dir/parts"
  -o "Dir::Etc::Preferences=$apt_dir/preferences"
  -o "Dir::Etc::PreferencesParts=$apt_dir/parts"
  -o "Dir::State::Lists=$apt_dir/lists"
  -o "Dir::State::Status=$apt_dir/status"
  -o "Dir::Cache=$apt_dir/cache"
  -o "APT::Architectures::=amd64"
  -o "APT::Architectures::=arm64"
  -o "Acquire::Languages=none"
  -o "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false"
  -o "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false"
  -o "APT::Sandbox::User=$(id -un)"
)
# Refreshed when older than a day: unstable moves, and superseded .debs leave the mirror.
stamp="$(cat "$apt_dir/sources.list"; echo "architectures: amd64 arm64")"
if [ "$stamp" != "$(cat "$apt_dir/lists/.stamp" 2>/dev/null)" ] ||
  [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*_InRelease' -mtime -1)" ]; then
  echo "python314.sh: apt-get update ($suite, bookworm; amd64, arm64) into $apt_dir" >&2
  apt-get -qq "${apt_opts[@]}" update >&2 || die "apt-get update failed (is $mirror reachable?)"
  echo "$stamp" >"$apt_dir/lists/.stamp"
fi

fetch() { # fetch PACKAGE... into $1 (a new folder), then unpack them into $2
  local debs="$1" into="$2"
  shift 2
  rm -rf "$debs"
  mkdir -p "$debs" "$into"
  (cd "$debs" && apt-get -qq "${apt_opts[@]}" download "$@" >&2) ||
    die "apt-get download failed for: $* (is python3.14 still in $suite? set MEMVAULT_PY314_SUITE)"
  for deb in "$debs"/*.deb; do
    dpkg-deb -x "$deb" "$into"
    dpkg-deb -f "$deb" Package Version Architecture | paste -sd' ' >>"$into/.packages"
  done
}

qemu=""
if [ "$arch" != "$native" ]; then
  qemu="$out/qemu/usr/bin/qemu-$qemu_arch-static"
  if [ ! -x "$qemu" ]; then
    rm -rf "$out/qemu"
    fetch "$out/qemu-debs" "$out/qemu" "qemu-user-static/bookworm"
    rm -rf "$out/qemu-debs" "$out/qemu/usr/share"
    # One emulator is needed; the package holds one for every architecture (370 MB).
    find "$out/qemu/usr/bin" -name 'qemu-*' ! -name "qemu-$qemu_arch-static" -delete
  fi
  [ -x "$qemu" ] || die "no $qemu in bookworm's qemu-user-static"
fi

echo "python314.sh: unpacking python3.14 for $arch from $suite into $dest/root" >&2
rm -rf "$dest"
fetch "$dest/debs" "$dest/root" "${packages[@]/%/:$arch}"
rm -rf "$dest/debs"
# usrmerge: the binaries name their loader as /lib/...; qemu -L looks for it in the root.
[ -e "$dest/root/lib" ] || ln -s usr/lib "$dest/root/lib"
[ -x "$dest/root/usr/bin/python3.14" ] || die "python3.14 was not unpacked into $dest/root"

# The launcher lives beside the binary, so Python finds its standard library from it
# (even under -E or -I, which ignore PYTHONHOME), and it is what sys.executable names:
# subprocesses (compileall -j) run through it too.
if [ -z "$qemu" ]; then
  cat >"$launcher" <<EOF
#!/bin/sh
# python3.14 unpacked from Debian $suite (scripts/python314.sh), run by its own loader.
root="$dest/root"
exec "\$root/$loader" --inhibit-cache --library-path "\$root/usr/lib/$triplet" --argv0 "\$0" "\$root/usr/bin/python3.14" "\$@"
EOF
else
  cat >"$launcher" <<EOF
#!/bin/sh
# python3.14 for $arch unpacked from Debian $suite (scripts/python314.sh), under qemu.
root="$dest/root"
exec "$qemu" -L "\$root" -0 "\$0" "\$root/usr/bin/python3.14" "\$@"
EOF
fi
chmod +x "$launcher"

# The standard library's bytecode (Debian's packages leave it to their postinst).
"$compiler" -m compileall -q -j0 "$dest/root/usr/lib/python3.14" >/dev/null ||
  die "compiling the standard library of $dest/root failed"

works "$launcher" || die "the unpacked python3.14 for $arch does not run: $launcher"
echo "$launcher"
