#!/bin/sh
# Build llama.cpp's llama-server into PREFIX/builds/NAME and point PREFIX/current at it once it
# runs. A build that fails leaves `current`, and the server using it, untouched.
#
# llama-build.sh --prefix P --name N (--git-url U --ref R | --tarball T [--subdir S])
#                [--jobs J] [--ccache-dir D] [--expect-archs "86 120a"]
#                [--fetch-attempts N] [--retry-delay S] -- CMAKE_ARGS...
set -eu

prefix= name= git_url= ref= tarball= subdir= jobs=0 ccache_dir= expect= attempts=3 delay=10
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --name) name=$2; shift 2 ;;
        --git-url) git_url=$2; shift 2 ;;
        --ref) ref=$2; shift 2 ;;
        --tarball) tarball=$2; shift 2 ;;
        --subdir) subdir=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --ccache-dir) ccache_dir=$2; shift 2 ;;
        --expect-archs) expect=$2; shift 2 ;;
        --fetch-attempts) attempts=$2; shift 2 ;;
        --retry-delay) delay=$2; shift 2 ;;
        --) shift; break ;;
        *) echo "llama-build: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] && [ -n "$name" ] || { echo "llama-build: --prefix and --name are required" >&2; exit 2; }
[ "$jobs" -gt 0 ] 2>/dev/null || jobs=$(nproc)

say() { echo "llama-build[$name]: $*"; }
switch() {
    ln -sfn "builds/$name" "$prefix/current.new"
    mv -Tf "$prefix/current.new" "$prefix/current"
    say "current -> builds/$name"
}

mkdir -p "$prefix/builds" "$prefix/work"
exec 9>"$prefix/.build.lock"
flock 9
dest="$prefix/builds/$name"
if [ -f "$dest/.complete" ]; then
    say "already built"
    switch
    exit 0
fi

work="$prefix/work/$name"
stage="$prefix/builds/.$name.partial"
cleanup() { rm -rf "$work" "$stage"; }
trap cleanup EXIT
cleanup
mkdir -p "$work/src"

if [ -n "$tarball" ]; then
    say "unpacking $(basename "$tarball")"
    tar -xzf "$tarball" -C "$work/src"
    if [ -n "$subdir" ]; then
        src=$(find "$work/src" -mindepth 1 -maxdepth 1 -type d | head -n 1)/$subdir
        [ -d "$src" ] || src="$work/src/$subdir"
    else
        src=$(find "$work/src" -path '*/tools/server/CMakeLists.txt' | head -n 1)
        [ -n "$src" ] || { echo "llama-build: no tools/server/CMakeLists.txt in $tarball" >&2; exit 1; }
        src=${src%/tools/server/CMakeLists.txt}
    fi
else
    git -C "$work/src" init -q
    # The network is the one step here that fails transiently: try the fetch again, not the build.
    attempt=1
    while :; do
        say "fetching $ref from $git_url (attempt $attempt/$attempts)"
        git -C "$work/src" fetch -q --depth 1 "$git_url" "$ref" && break
        [ "$attempt" -lt "$attempts" ] || { echo "llama-build: fetching $ref failed $attempts times" >&2; exit 1; }
        attempt=$((attempt + 1))
        sleep "$delay"
    done
    git -C "$work/src" -c advice.detachedHead=false checkout -q FETCH_HEAD
    src="$work/src"
fi
[ -f "$src/CMakeLists.txt" ] || { echo "llama-build: no llama.cpp CMakeLists.txt in the source" >&2; exit 1; }

# One locale for every build, whoever starts it (gpuprov over SSH, Ansible, a shell): ccache hashes
# LANG, LC_ALL, LC_CTYPE and LC_MESSAGES, so builds started by different callers share the cache,
# and the compiler's messages stay in English for `gpuprov explain`.
unset LC_CTYPE LC_MESSAGES
export LANG=C LC_ALL=C
if [ -n "$ccache_dir" ] && command -v ccache >/dev/null 2>&1; then
    mkdir -p "$ccache_dir"
    export CCACHE_DIR="$ccache_dir" CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1
fi
say "configuring: $*"
cmake -S "$src" -B "$work/build" "$@"
# A CUDA build was planned: stop here, not after a CPU-only build, when CMake enabled no CUDA
# (nvcc not found, or a project that makes CUDA optional and fell back to the CPU).
if [ -n "$expect" ] && ! grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=/' "$work/build/CMakeCache.txt"; then
    echo "llama-build: a CUDA build was planned (--expect-archs $expect) but CMake enabled no CUDA compiler (no CMAKE_CUDA_COMPILER in CMakeCache.txt)" >&2
    exit 1
fi
say "building llama-server with $jobs jobs"
cmake --build "$work/build" --target llama-server -j "$jobs"

mkdir -p "$stage/bin"
cp "$work/build/bin/llama-server" "$stage/bin/"
"$stage/bin/llama-server" --version > "$stage/version.txt" 2>&1 || {
    echo "llama-build: the new llama-server does not run:" >&2; cat "$stage/version.txt" >&2; exit 1; }
say "built: $(grep -m1 version "$stage/version.txt" || true)"
if [ -n "$expect" ]; then
    nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$work/build/CMakeCache.txt")
    cuobjdump=
    for c in "${nvcc%/*}/cuobjdump" "$(command -v cuobjdump || true)" /usr/local/cuda/bin/cuobjdump; do
        if [ -n "$c" ] && [ -x "$c" ]; then cuobjdump=$c; break; fi
    done
    [ -n "$cuobjdump" ] || { echo "llama-build: cuobjdump not found (for --expect-archs)" >&2; exit 1; }
    "$cuobjdump" --list-elf "$stage/bin/llama-server" > "$stage/cubins.txt"
    for arch in $expect; do
        grep -q "sm_$arch\." "$stage/cubins.txt" || {
            echo "llama-build: no sm_$arch code in llama-server (cuobjdump --list-elf)" >&2; exit 1; }
    done
    say "CUDA code for: $expect"
fi
printf '%s\n' "$@" > "$stage/cmake-args.txt"
touch "$stage/.complete"
mv -T "$stage" "$dest"
switch
