#!/usr/bin/env bash
# Install what regtrack needs on Debian/Ubuntu: system tools from apt, regtrack and its
# locked Python dependencies (uv.lock) into ./.venv, memtier_benchmark and the open-loop
# engine regtrack-openloop (engine/, with cargo) into .venv/bin.
# Safe to run again: what is already installed is kept, so a second run takes seconds.
#
#   scripts/install.sh           regtrack, for measuring
#   scripts/install.sh --test    also what only the tests use (scripts/test.sh runs this),
#                                the task-queue libraries of the queues group among them
#   scripts/install.sh --no-project
#                                everything but regtrack itself (the Dockerfile's layer that
#                                a change to regtrack's code does not rebuild)
#
# memtier_benchmark is built from its pinned upstream release (a shallow clone of tag 2.3.0,
# whose commit is checked), unless one is on PATH. Where GitHub cannot be reached, give that
# release's source archive (memtier_benchmark-2.3.0.tar.gz) with --memtier-archive PATH or
# REGTRACK_MEMTIER_ARCHIVE=PATH: it is used instead, checked against the SHA-256 below.
set -euo pipefail

TEST=0
PROJECT=1
while [ $# -gt 0 ]; do
    case "$1" in
        --test) TEST=1 ;;
        --no-project) PROJECT=0 ;;
        --memtier-archive)
            [ $# -ge 2 ] || { echo "regtrack install: --memtier-archive needs a PATH" >&2; exit 2; }
            REGTRACK_MEMTIER_ARCHIVE=$2; shift ;;
        *) echo "regtrack install: unknown option $1 (--test, --no-project, --memtier-archive PATH)" >&2
           exit 2 ;;
    esac
    shift
done
if [ -n "${REGTRACK_MEMTIER_ARCHIVE:-}" ]; then
    # A relative path means the caller's directory, not the project's.
    REGTRACK_MEMTIER_ARCHIVE=$(realpath -m -- "$REGTRACK_MEMTIER_ARCHIVE")
fi
cd "$(dirname "$0")/.."

say() { echo "regtrack install: $*" >&2; }
fail() { echo "regtrack install: error: $1" >&2; exit "${2:-3}"; }

if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    fail "regtrack needs Python 3.11 or newer, and python3 here is $(python3 --version 2>&1 \
|| echo 'missing'): install python3.11 (or newer) as python3, then run this again" 2
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

MEMTIER=memtier_benchmark
MEMTIER_TAG=2.3.0
MEMTIER_COMMIT=1655c39a2be50914d87cf450bb54aa8475293e77
MEMTIER_SHA256=c093d85573e9d143e92a2d107f516caf2f09cf716eeb178047a03165fdde05b8
MEMTIER_REPO=https://github.com/RedisLabs/memtier_benchmark.git
MEMTIER_BIN=.venv/bin/$MEMTIER

memtier_wanted() {
    # Build ours unless one is on PATH or ours is already the pinned release.
    ! command -v "$MEMTIER" >/dev/null 2>&1 \
        && ! { [ -x "$MEMTIER_BIN" ] && "$MEMTIER_BIN" --version 2>/dev/null | grep -q "v=$MEMTIER_TAG"; }
}
# what memtier_benchmark's build needs (its README)
MEMTIER_BUILD_PACKAGES=(autoconf automake libtool pkg-config libevent-dev zlib1g-dev libssl-dev)

apt_install() {
    local missing=() package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    say "apt packages: ${missing[*]}"
    $SUDO apt-get update -qq || fail "apt-get update failed (see above): check the machine's \
apt sources and network, then run this again"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null || fail "apt-get could not install ${missing[*]} (see above)"
}

# redis-server/redis-tools: a server to measure and redis-benchmark as load generator.
# util-linux: taskset (CPU pinning). build-essential, git: building Redis versions from source.
# valgrind: callgrind, for --metric instructions.
# ccache: a commit that changes one file rebuilds in seconds (ranges, bisect), not minutes.
PACKAGES=(redis-server redis-tools util-linux build-essential ccache git python3-venv valgrind)
if memtier_wanted; then PACKAGES+=("${MEMTIER_BUILD_PACKAGES[@]}"); fi
if [ "$TEST" -eq 1 ]; then
    # chromium opens the report pages.
    PACKAGES+=(chromium fonts-dejavu-core)
fi
apt_install "${PACKAGES[@]}"

# regtrack-openloop, the open-loop engine (engine/, Rust): built with the crate versions
# engine/Cargo.lock pins, in a target folder outside the clone (kept between clones, so a
# rebuild is incremental). Skipped when the installed binary is this version and newer than
# every engine source. The Docker image's context has no engine/: nothing to build there.
# Its build runs in the background while uv and memtier_benchmark install (a cold build is
# ~40 s of a CI run, mostly on the second CPU while memtier's configure uses one), and
# engine_finish waits for it.
ENGINE=regtrack-openloop
ENGINE_BIN=.venv/bin/$ENGINE
engine=""
engine_pid=""
engine_log=""
engine_start() {
    [ "$PROJECT" -eq 1 ] && [ -f engine/Cargo.toml ] || return 0
    engine_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' engine/Cargo.toml | head -n 1)
    if [ -x "$ENGINE_BIN" ] \
        && [ "$("$ENGINE_BIN" --version 2>/dev/null)" = "$ENGINE $engine_version" ] \
        && [ -z "$(find engine/Cargo.toml engine/Cargo.lock engine/src -newer "$ENGINE_BIN" \
            -print -quit)" ]; then
        engine=$ENGINE_BIN
    elif ! command -v cargo >/dev/null 2>&1; then
        # Only the open-loop latency measurements need it; the tests need everything.
        line="cargo is not installed, so $ENGINE (open-loop latency) is not built: install \
Rust 1.78 or newer (rustup), then run this again"
        if [ "$TEST" -eq 1 ]; then fail "$line"; fi
        say "warning: $line"
    else
        cache=${REGTRACK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/regtrack}
        export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$cache/engine-target}
        say "building $ENGINE $engine_version (cargo build --release --locked, in the background)"
        engine_log=$(mktemp)
        cargo build --quiet --release --locked --manifest-path engine/Cargo.toml \
            >"$engine_log" 2>&1 &
        engine_pid=$!
    fi
}
engine_finish() {
    [ -n "$engine_pid" ] || return 0
    wait "$engine_pid" || fail "building $ENGINE failed ($(cargo --version 2>&1)); the end \
of its log:
$(tail -n 15 "$engine_log")"
    rm -f "$engine_log"
    install -m 0755 "$CARGO_TARGET_DIR/release/$ENGINE" "$ENGINE_BIN"
    engine=$ENGINE_BIN
}
engine_start

# uv installs exactly what uv.lock says, in seconds; uv itself is pinned by hash.
UV=.tools/uv/bin/uv
UV_VERSION=$(sed -n 's/^uv==\([0-9.]*\).*/\1/p' scripts/uv-requirements.txt)
if ! [ -x "$UV" ] || [ "$("$UV" --version | cut -d' ' -f2)" != "$UV_VERSION" ]; then
    say "uv $UV_VERSION in .tools/uv"
    rm -rf .tools/uv
    python3 -m venv .tools/uv || fail "python3 -m venv failed: install python3-venv"
    .tools/uv/bin/python -m pip install -q --disable-pip-version-check --require-hashes \
        -r scripts/uv-requirements.txt || fail "pip could not install uv $UV_VERSION from \
scripts/uv-requirements.txt (see above): check the machine's access to PyPI"
fi
say "Python environment in .venv (uv.lock$([ "$TEST" -eq 1 ] && echo ', with the test and queues groups'))"
UV_GROUP=()
# queues: the task-queue libraries whose traffic tests/test_library_traffic.py measures.
if [ "$TEST" -eq 1 ]; then UV_GROUP=(--group test --group queues); else UV_GROUP=(--inexact); fi
# Bytecode compiled once here: where PYTHONDONTWRITEBYTECODE is set (as on CI machines), every
# command would otherwise compile scipy, pandas and regtrack again (2.6 s instead of 0.7 s).
if [ "$PROJECT" -eq 0 ]; then UV_GROUP+=(--no-install-project); fi
UV_PYTHON_DOWNLOADS=never "$UV" sync --quiet --locked --compile-bytecode --python python3 \
    "${UV_GROUP[@]}" || fail "uv sync could not install uv.lock into .venv (see above)"
if [ "$PROJECT" -eq 1 ]; then
    .venv/bin/python -m compileall -q -j 0 regtrack || fail "compiling regtrack failed (see above)"
fi

if memtier_wanted; then
    apt_install "${MEMTIER_BUILD_PACKAGES[@]}"  # .venv was made anew: the build needs them
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    if [ -n "${REGTRACK_MEMTIER_ARCHIVE:-}" ]; then
        say "$MEMTIER $MEMTIER_TAG from $REGTRACK_MEMTIER_ARCHIVE"
        [ -f "$REGTRACK_MEMTIER_ARCHIVE" ] || fail "REGTRACK_MEMTIER_ARCHIVE: \
$REGTRACK_MEMTIER_ARCHIVE is not a file"
        # Copied first, then checked and unpacked: the archive may sit in a shared folder.
        cp -- "$REGTRACK_MEMTIER_ARCHIVE" "$work/archive.tar.gz"
        got=$(sha256sum "$work/archive.tar.gz" | cut -d' ' -f1)
        [ "$got" = "$MEMTIER_SHA256" ] || fail "$REGTRACK_MEMTIER_ARCHIVE has SHA-256 $got, \
not $MEMTIER_SHA256 ($MEMTIER $MEMTIER_TAG's release source): use that archive"
        tar -xzf "$work/archive.tar.gz" -C "$work" --no-same-owner
        src="$work/$MEMTIER-$MEMTIER_TAG"
    else
        say "$MEMTIER $MEMTIER_TAG from $MEMTIER_REPO"
        src="$work/src"
        git clone -q --depth 1 --branch "$MEMTIER_TAG" -c advice.detachedHead=false \
            "$MEMTIER_REPO" "$src" 2>"$work/clone.log" \
            || fail "cannot clone $MEMTIER_REPO ($(tail -n 1 "$work/clone.log")): where \
GitHub cannot be reached, set REGTRACK_MEMTIER_ARCHIVE to $MEMTIER-$MEMTIER_TAG.tar.gz, \
its release source archive"
        got=$(git -C "$src" rev-parse HEAD)
        [ "$got" = "$MEMTIER_COMMIT" ] || fail "tag $MEMTIER_TAG of $MEMTIER_REPO is commit \
$got, not the pinned $MEMTIER_COMMIT: refusing to build it"
    fi
    [ -f "$src/configure.ac" ] || fail "no $MEMTIER source tree in the archive"
    say "building $MEMTIER (autoreconf, configure, make)"
    (
        cd "$src"
        autoreconf -ivf >"$work/build.log" 2>&1 \
            && ./configure >>"$work/build.log" 2>&1 \
            && make -j "$(nproc)" >>"$work/build.log" 2>&1
    ) || fail "building $MEMTIER failed; the end of its log:
$(tail -n 15 "$work/build.log")"
    install -m 0755 "$src/$MEMTIER" "$MEMTIER_BIN"
fi

engine_finish
if command -v "$MEMTIER" >/dev/null 2>&1; then
    memtier="$(command -v "$MEMTIER") (on PATH)"
    "$MEMTIER" --version 2>/dev/null | grep -q "v=$MEMTIER_TAG" || say "warning: the \
$MEMTIER on PATH is not release $MEMTIER_TAG; regtrack uses it, and records its version with \
every run (remove it from PATH to use the pinned build)"
else
    memtier="$MEMTIER_BIN"
fi
if [ "$PROJECT" -eq 1 ]; then installed=$(.venv/bin/regtrack --version); else installed="without regtrack"; fi
say "done ($installed; $memtier: $("${memtier%% *}" --version | head -n 1)\
${engine:+; $engine: $("$engine" --version)})"
