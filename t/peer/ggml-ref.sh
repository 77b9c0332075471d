#!/bin/sh
# ggml-ref.sh OUT: build OUT/ggml-peer, ggml's reference (de)quantizers from
# the ggml-quants.c that the llama-cpp-python sdist vendors, driven by
# t/peer/ggml-peer.c.  The sdist is looked for in $MEMRA_PEER_CACHE (default
# build/peer-cache, where t/all.sh downloads it).  Exit 0 built (prints the
# binary's path), 3 no sdist, 1 build failed.
#
# Built with -ffp-contract=off (as our -std=c11 build is) and -DNDEBUG (as a
# release ggml is): with contraction a compiler may fuse a*b+c and change
# the last bit of a scale, and ggml's asserts would stop on huge inputs.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: ggml-ref.sh OUT}
cache=${MEMRA_PEER_CACHE:-$top/build/peer-cache}
sdist=$(ls "$cache"/llama_cpp_python-*.tar.gz 2>/dev/null | sort -V | tail -n 1) || true
if [ -z "$sdist" ]; then
	echo "ggml-ref.sh: no llama_cpp_python-*.tar.gz in $cache" >&2
	exit 3
fi
mkdir -p "$out"
bin=$out/ggml-peer
if [ -x "$bin" ] && [ "$bin" -nt "$sdist" ] && [ "$bin" -nt "$top/t/peer/ggml-peer.c" ]; then
	echo "$bin"
	exit 0
fi
base=$(basename "$sdist" .tar.gz)
g=$base/vendor/llama.cpp/ggml
rm -rf "$out/src"
mkdir -p "$out/src"
tar -xzf "$sdist" -C "$out/src" --wildcards "$g/include/*" "$g/src/*.h" \
    "$g/src/ggml-quants.c" || { echo "ggml-ref.sh: $sdist: cannot extract ggml" >&2; exit 1; }
${CC:-cc} -std=gnu11 -O2 -ffp-contract=off -DNDEBUG -w \
    -I"$out/src/$g/include" -I"$out/src/$g/src" -I"$out/src/$g/src/ggml-cpu" \
    -o "$bin.tmp" "$out/src/$g/src/ggml-quants.c" "$top/t/peer/ggml-peer.c" -lm ||
    { echo "ggml-ref.sh: cannot build ggml-peer from $sdist" >&2; exit 1; }
mv "$bin.tmp" "$bin"
echo "$bin"
