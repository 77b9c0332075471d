#!/bin/sh
# llamacpp-src.sh: cut llama.cpp's source out of the llama-cpp-python sdist
# (build/peer-cache, where t/all.sh downloads it) into a tarball small enough
# to carry to the device: .gpuwork/llamacpp-src.tar.gz (.gpuwork/ is ignored
# by git; name it in the device call's carry).  It holds what the libraries
# and llama-bench build from (CMakeLists.txt, cmake/, include/, src/,
# common/, vendor/, ggml/ without the backends other than CPU and CUDA,
# tools/llama-bench) and a tools/CMakeLists.txt that adds llama-bench alone;
# no models/, docs/, tests/, ui/ or server.  tools/llamacpp-cuda.sh builds it.
# LLAMACPP_SERVER=1 adds llama-server (tools/server, tools/mtmd, tools/ui's
# cmake; the serving peer) beside llama-bench; default OUT then
# .gpuwork/llamacpp-server-src.tar.gz.
#   usage: sh tools/llamacpp-src.sh [OUT.tar.gz]   prints the tarball's path
# Exit 0 made, 3 no sdist, 1 failed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cache=${MEMRA_PEER_CACHE:-$top/build/peer-cache}
server=${LLAMACPP_SERVER:-0}
if [ "$server" = 1 ]; then out=${1:-$top/.gpuwork/llamacpp-server-src.tar.gz}
else out=${1:-$top/.gpuwork/llamacpp-src.tar.gz}; fi
sdist=$(ls "$cache"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1) || true
if [ -z "$sdist" ]; then
	echo "llamacpp-src.sh: no llama_cpp_python-*.tar.gz in $cache" >&2
	exit 3
fi
base=$(basename "$sdist" .tar.gz)
v=$base/vendor/llama.cpp
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$sdist" -C "$tmp" "$v/CMakeLists.txt" "$v/cmake" "$v/include" "$v/src" \
    "$v/common" "$v/vendor" "$v/ggml" "$v/tools/llama-bench" "$v/LICENSE" \
    $([ "$server" = 1 ] && echo "$v/tools/server $v/tools/mtmd $v/tools/ui $v/scripts/ui-assets.cmake") ||
	{ echo "llamacpp-src.sh: $sdist: cannot extract llama.cpp" >&2; exit 1; }
s=$tmp/llamacpp-src
mv "$tmp/$v" "$s"
# backends other than CPU and CUDA are add_subdirectory'd only when enabled
for d in "$s"/ggml/src/ggml-*/; do
	case ${d%/} in */ggml-cpu | */ggml-cuda) ;; *) rm -rf "$d" ;; esac
done
cat >"$s/tools/CMakeLists.txt" <<'CM'
# cut by memra's tools/llamacpp-src.sh: llama-bench alone
find_package(Threads REQUIRED)
llama_add_compile_flags()
add_subdirectory(llama-bench)
CM
if [ "$server" = 1 ]; then
	# the web UI's sources stay out: llama-server is built with LLAMA_BUILD_UI=OFF
	rm -rf "$s/tools/ui/src" "$s/tools/ui/tests" "$s/tools/ui/static"
	sed -i 's/^# cut by .*/# cut by memra'"'"'s tools\/llamacpp-src.sh: llama-bench and llama-server/' "$s/tools/CMakeLists.txt"
	printf 'add_subdirectory(mtmd)\nadd_subdirectory(ui)\nadd_subdirectory(server)\n' >>"$s/tools/CMakeLists.txt"
fi
echo "${base#llama_cpp_python-}" >"$s/SDIST_VERSION"
mkdir -p "$(dirname "$out")"
tar -czf "$out.tmp" -C "$tmp" llamacpp-src
mv "$out.tmp" "$out"
echo "$out"
