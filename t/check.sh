#!/bin/sh
# make check: every test, one closing line "N passed, N failed".
#   unit tests (normal and ASan+UBSan builds), fuzz-corpus replays under the
#   sanitizers, bats for every binary (CPU only: gpu-tagged tests are skipped),
#   mandoc -Tlint on every man page, tools/bats-lint on the bats files, and a bounded
#   libFuzzer run when clang is here.
# MEMRA_REQUIRE_PEERS=1 (set by t/all.sh) turns a missing peer package into a failure.
# With GNU parallel (t/all.sh installs it) bats runs as many files at a time as
# there are cores (MEMRA_BATS_JOBS sets the count; 1 runs them one by one), each
# file's tests in order: the files share no state (temporary directories, port 0).
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 2
pass=0 fail=0 failed=""
bj=${MEMRA_BATS_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $bj in
''|*[!0-9]*|0) echo "check: MEMRA_BATS_JOBS: '$bj': not a count of files at a time" >&2; exit 2 ;;
esac

count() {	# count NAME STATUS
	if [ "$2" -eq 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); failed="$failed $1"; fi
}

for u in build/t/unit/* build-san/t/unit/*; do
	[ -x "$u" ] || continue
	case $u in *.d) continue;; esac
	echo "== $u"
	"$u"; count "$u" $?
done

for r in build-san/t/fuzz/replay-*; do
	[ -x "$r" ] || continue
	case $r in *.d) continue;; esac
	name=${r##*/replay-}
	echo "== fuzz corpus $name (ASan+UBSan)"
	"$r" "t/fuzz/$name"; count "fuzz-corpus-$name" $?
done

if command -v mandoc >/dev/null 2>&1; then
	for m in man/*.1 man/*.7; do
		[ -f "$m" ] || continue
		echo "== mandoc -Tlint $m"
		out=$(mandoc -Tlint -W warning "$m" 2>&1)
		if [ -n "$out" ]; then echo "$out"; count "$m" 1; else count "$m" 0; fi
	done
else
	echo "check: mandoc not found: man pages not linted" >&2
	count mandoc-missing 1
fi

if ls t/*.bats >/dev/null 2>&1; then
	echo "== bats-lint t/*.bats (assertions that would not stop a test)"
	sh tools/bats-lint t/*.bats; count bats-lint $?
	if command -v bats >/dev/null 2>&1; then
		parallel --version 2>/dev/null | grep -q 'GNU parallel' || bj=1
		set --
		[ "$bj" -gt 1 ] && set -- --jobs "$bj" --no-parallelize-within-files
		echo "== bats ($bj file(s) at a time)"
		out=$(mktemp)
		bats "$@" --filter-tags '!gpu' --formatter tap t/ | tee "$out"
		p=$(grep -c '^ok ' "$out"); f=$(grep -c '^not ok ' "$out")
		pass=$((pass + p)); fail=$((fail + f))
		[ "$f" -gt 0 ] && failed="$failed bats($f)"
		rm -f "$out"
	else
		echo "check: bats not found" >&2
		count bats-missing 1
	fi
fi

if [ "${MEMRA_FUZZ_SECONDS:-20}" -gt 0 ] && command -v clang >/dev/null 2>&1; then
	echo "== libFuzzer, ${MEMRA_FUZZ_SECONDS:-20}s per target"
	sh t/fuzz/run.sh clang "${MEMRA_FUZZ_SECONDS:-20}"; count fuzz $?
fi

[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
