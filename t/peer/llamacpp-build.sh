#!/bin/sh
# llamacpp-build.sh: build llama.cpp's shared libraries (libllama, libggml*,
# CPU backend, Release) from the llama-cpp-python sdist and put them beside
# the sdist's pure-Python ctypes bindings, so that `import llama_cpp` works
# without `pip install llama-cpp-python` (which builds all of llama.cpp's
# tools too).  The sdist is looked for in $MEMRA_PEER_CACHE (default
# build/peer-cache, where t/all.sh downloads it); the result goes to
# $MEMRA_PEER_CACHE/llamacpp-VERSION/ and a second run is instant.
#
# On success prints the environment to use, one export a line:
#   PYTHONPATH=<dir holding llama_cpp/>  LLAMA_CPP_LIB_PATH=<its lib/>
# so `eval "$(t/peer/llamacpp-build.sh)"` makes the live peer visible.
# Exit 0 built, 3 no sdist, 1 build failed (build log kept in the cache dir).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cache=${MEMRA_PEER_CACHE:-$top/build/peer-cache}
sdist=$(ls "$cache"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1) || true
if [ -z "$sdist" ]; then
	echo "llamacpp-build.sh: no llama_cpp_python-*.tar.gz in $cache" >&2
	exit 3
fi
base=$(basename "$sdist" .tar.gz)
out=$cache/llamacpp-${base#llama_cpp_python-}
py=$out/py
lib=$py/llama_cpp/lib
print_env() {
	echo "export PYTHONPATH='$py'\${PYTHONPATH:+:\$PYTHONPATH}"
	echo "export LLAMA_CPP_LIB_PATH='$lib'"
}
if [ -f "$out/stamp" ] && [ "$out/stamp" -nt "$sdist" ]; then
	print_env
	exit 0
fi
rm -rf "$out"
mkdir -p "$out/src"
v=$base/vendor/llama.cpp
# only what the library build reads: no models/ (75 MB), docs/, tests/, tools/
tar -xzf "$sdist" -C "$out/src" "$base/llama_cpp" "$v/CMakeLists.txt" "$v/cmake" \
    "$v/ggml" "$v/src" "$v/include" "$v/vendor" "$v/common" "$v/LICENSE" ||
	{ echo "llamacpp-build.sh: $sdist: cannot extract" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
log=$out/build.log
# GGML_NATIVE stays on (as pip builds it): one CPU variant for this machine.
# RUNPATH $ORIGIN: libllama finds libggml* beside it once copied out of the build
if ! { cmake -S "$out/src/$v" -B "$out/b" -DCMAKE_BUILD_TYPE=Release \
	    -DBUILD_SHARED_LIBS=ON -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON \
	    -DCMAKE_INSTALL_RPATH='$ORIGIN' -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF \
	    -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
	    -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
	    -DGGML_BACKEND_DL=OFF -DGGML_CPU_ALL_VARIANTS=OFF &&
	cmake --build "$out/b" --config Release -j "$jobs" --target llama; } >"$log" 2>&1; then
	tail -n 30 "$log" >&2
	echo "llamacpp-build.sh: build failed (log: $log)" >&2
	exit 1
fi
mkdir -p "$py"
cp -R "$out/src/$base/llama_cpp" "$py/"
mkdir -p "$lib"
find "$out/b" -name 'lib*.so*' -exec cp -P {} "$lib/" \;
[ -e "$lib/libllama.so" ] || { echo "llamacpp-build.sh: no libllama.so built" >&2; exit 1; }
rm -rf "$out/src" "$out/b"
touch "$out/stamp"
print_env
