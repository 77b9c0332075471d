#!/bin/sh
# llamacpp-server.sh: build llama.cpp's llama-server (the serving peer:
# continuous batching, -np slots) from the llama-cpp-python sdist's vendored
# source; no network, no libcurl or OpenSSL, no web UI.  The build directory
# stays, so a second call only relinks; prints llama-server's path.
#   usage: sh tools/llamacpp-server.sh [SDIST [BUILDDIR]]
#     SDIST     default: the newest build/peer-cache/llama_cpp_python-*.tar.gz
#               (t/all.sh downloads it)
#     BUILDDIR  default /tmp/llamacpp-server
# Environment: LLAMACPP_CUDA=ON builds the CUDA backend (CUDA_ARCH, default
# 90); JOBS (default nproc).  The log is BUILDDIR/build.log.
# Exit 0 built, 1 failed, 2 misused.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
sdist=${1:-$(ls "$top"/build/peer-cache/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1)}
dir=${2:-/tmp/llamacpp-server}
cuda=${LLAMACPP_CUDA:-OFF}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
[ -n "$sdist" ] && [ -f "$sdist" ] ||
	{ echo "llamacpp-server.sh: no llama-cpp-python sdist (run sh t/all.sh --deps)" >&2; exit 2; }
base=$(basename "$sdist" .tar.gz)
src=$dir/$base/vendor/llama.cpp
mkdir -p "$dir"
if [ ! -f "$src/CMakeLists.txt" ]; then
	tar -xzf "$sdist" -C "$dir" --exclude="$base/vendor/llama.cpp/models/*" \
	    --exclude="$base/vendor/llama.cpp/docs/*" "$base/vendor/llama.cpp" ||
		{ echo "llamacpp-server.sh: $sdist: cannot extract llama.cpp" >&2; exit 1; }
fi
set -- -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DGGML_NATIVE=ON -DGGML_CUDA="$cuda"
[ "$cuda" = ON ] && set -- "$@" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DGGML_CUDA_NCCL=OFF
b=$dir/build-$cuda
log=$dir/build.log
if ! { cmake -S "$src" -B "$b" "$@" &&
    cmake --build "$b" --config Release -j "$jobs" --target llama-server; } >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "llamacpp-server.sh: build failed (log: $log)" >&2
	exit 1
fi
echo "$b/bin/llama-server"
