bats_require_minimum_version 1.5.0
# The build records its configuration: changing CUDA=, libcurl or the flags
# rebuilds what depends on it, with no `make clean`; the same configuration
# rebuilds nothing.  Run on a scratch copy of the sources (CPU build only).
setup_file() {
	export SRC="$BATS_FILE_TMPDIR/src"
	mkdir -p "$SRC"
	(cd "$BATS_TEST_DIRNAME/.." && tar cf - GNUmakefile lib cuda bin) | (cd "$SRC" && tar xf -)
	make -C "$SRC" -j2 CUDA=0 HAVE_CURL=0 all >"$BATS_FILE_TMPDIR/build.log" 2>&1
}
setup() { load helper; }

compiles() {	# compiles LOG: the C objects a make log compiles
	grep -c -- ' -c -o build/lib/' "$1" || true
}

@test "the same configuration rebuilds nothing" {
	run -0 make -C "$SRC" CUDA=0 HAVE_CURL=0 all
	[[ $output == *"Nothing to be done"* ]]
}

@test "the configuration is recorded in build/" {
	grep -q -- '-std=c11' "$SRC/build/conf-c"
	! grep -q MEMRA_HAVE_CURL "$SRC/build/conf-c" || false
	! grep -q MEMRA_HAVE_CUDA "$SRC/build/conf-c" || false
}

@test "libcurl appearing rebuilds every C object and relinks hf-fetch" {
	run -0 make -n -C "$SRC" CUDA=0 HAVE_CURL=1 all
	n=$(ls "$SRC"/lib/*.c | wc -l)
	[ "$(grep -c -- ' -c -o build/lib/' <<<"$output")" -eq "$n" ]
	[[ $output == *"-DMEMRA_HAVE_CURL=1"* ]]
	[[ $output == *"-o bin/hf-fetch"* ]]
}

@test "a dry run changes nothing: the stamps are written by the build only" {
	run -0 make -n -C "$SRC" CUDA=0 HAVE_CURL=1 all
	run -0 make -C "$SRC" CUDA=0 HAVE_CURL=0 all
	[[ $output == *"Nothing to be done"* ]]
}

@test "CUDA=1 rebuilds the C objects and compiles the kernels" {
	run -0 make -n -C "$SRC" CUDA=1 HAVE_CURL=0 NVCC=nvcc CUDA_HOME=/nonexistent all
	n=$(ls "$SRC"/lib/*.c | wc -l)
	[ "$(grep -c -- ' -c -o build/lib/' <<<"$output")" -eq "$n" ]
	[[ $output == *"-DMEMRA_HAVE_CUDA=1"* ]]
	[[ $output == *"nvcc "*"-o build/cuda/"* ]]
}

@test "changing the optimisation flags rebuilds, and going back rebuilds again" {
	make -C "$SRC" -j2 CUDA=0 HAVE_CURL=0 OPT=-O1 all >"$BATS_TEST_TMPDIR/o1.log" 2>&1
	[ "$(compiles "$BATS_TEST_TMPDIR/o1.log")" -gt 0 ]
	grep -q -- '-O1' "$SRC/build/conf-c"
	make -C "$SRC" -j2 CUDA=0 HAVE_CURL=0 all >"$BATS_TEST_TMPDIR/o2.log" 2>&1
	[ "$(compiles "$BATS_TEST_TMPDIR/o2.log")" -eq "$(ls "$SRC"/lib/*.c | wc -l)" ]
	run -0 make -C "$SRC" CUDA=0 HAVE_CURL=0 all
	[[ $output == *"Nothing to be done"* ]]
}
