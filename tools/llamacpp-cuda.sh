#!/bin/sh
# llamacpp-cuda.sh: build llama.cpp's llama-bench with CUDA (sm_90) on the
# device from the tarball tools/llamacpp-src.sh makes; no network, no
# libcurl or OpenSSL.  The build directory stays (outside the checkout) so a
# second call on a still-warm machine only relinks; prints llama-bench's path.
#   usage: sh tools/llamacpp-cuda.sh [TARBALL [BUILDDIR]]
#     TARBALL   default .gpuwork/llamacpp-src.tar.gz
#     BUILDDIR  default /tmp/llamacpp-cuda
# Environment: LLAMACPP_CUDA=OFF builds the CPU-only llama-bench (a check
# that the tarball is complete, on a machine without a GPU); CUDA_ARCH
# (default 90); JOBS (default nproc); LLAMACPP_NATIVE=OFF builds the CPU
# code for any x86-64 (a build made here to run on the device);
# LLAMACPP_TARGET=llama-server builds the serving peer instead (from the
# tarball LLAMACPP_SERVER=1 tools/llamacpp-src.sh makes).  The build log is BUILDDIR/build.log
# (copied to $OUT when that is set).  Exit 0 built, 1 failed, 2 misused.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
tarball=${1:-$top/.gpuwork/llamacpp-src.tar.gz}
dir=${2:-/tmp/llamacpp-cuda}
cuda=${LLAMACPP_CUDA:-ON}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 4)}
target=${LLAMACPP_TARGET:-llama-bench}
case $target in llama-bench) srv=OFF ;; llama-server) srv=ON ;;
*) echo "llamacpp-cuda.sh: LLAMACPP_TARGET=$target: llama-bench or llama-server" >&2; exit 2 ;; esac
[ -f "$tarball" ] || { echo "llamacpp-cuda.sh: $tarball: no such file (run tools/llamacpp-src.sh)" >&2; exit 2; }
mkdir -p "$dir"
if [ ! -f "$dir/llamacpp-src/CMakeLists.txt" ] || [ "$tarball" -nt "$dir/llamacpp-src/CMakeLists.txt" ]; then
	rm -rf "$dir/llamacpp-src"
	tar -xzf "$tarball" -C "$dir"
	touch "$dir/llamacpp-src/CMakeLists.txt"
fi
log=$dir/build.log
set -- -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=$srv -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_BACKEND_DL=OFF -DGGML_NATIVE=${LLAMACPP_NATIVE:-ON} \
    -DGGML_CUDA_NCCL=OFF
if [ "$cuda" = ON ]; then
	set -- "$@" -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}"
	command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] ||
		{ echo "llamacpp-cuda.sh: nvcc not found" >&2; exit 1; }
	command -v nvcc >/dev/null 2>&1 || PATH=/usr/local/cuda/bin:$PATH
fi
b=$dir/build-$cuda
status=0
{ cmake -S "$dir/llamacpp-src" -B "$b" "$@" &&
	cmake --build "$b" --config Release -j "$jobs" --target "$target"; } >"$log" 2>&1 || status=$?
[ -n "${OUT:-}" ] && [ -d "$OUT" ] && cp "$log" "$OUT/llamacpp-build.log"
if [ "$status" -ne 0 ]; then
	tail -n 40 "$log" >&2
	echo "llamacpp-cuda.sh: build failed (log: $log)" >&2
	exit 1
fi
echo "$b/bin/$target"
