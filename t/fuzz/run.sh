#!/bin/sh
# run.sh CC SECONDS: build each t/fuzz/<target>.c as a libFuzzer binary and run it
# for SECONDS on a scratch copy of its corpus t/fuzz/<target>/.  A crash fails the run;
# the crasher is left in t/fuzz/corpus-work/ to be added to t/fuzz/<target>/ as a fixture.
# lib/ is compiled once (instrumented, -fsanitize=fuzzer-no-link) into an archive each
# target links; the targets run as many at a time as there are cores, each for SECONDS.
cc=${1:-clang} secs=${2:-30}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
work=t/fuzz/corpus-work
mkdir -p "$work/lib"
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cflags="-std=c11 -D_GNU_SOURCE -g -O1 -Ilib $(pkg-config --cflags libpng libjpeg)"
libs="$(pkg-config --libs libpng libjpeg) -lm -pthread"
jobs=$(nproc 2>/dev/null || echo 1)
rc=0

# lib/*.c once, in parallel; a failed object fails every target
rm -f "$work/lib/"*.o "$work/libmemra-fuzz.a"
obj='o=$0/lib/$(basename "$1" .c).o
'"$cc $cflags $san"' -fsanitize=fuzzer-no-link -c -o "$o" "$1" 2>"$o.log" ||
	{ echo "fuzz: $1: build failed:"; cat "$o.log"; exit 1; }'
if ! ls lib/*.c | xargs -P "$jobs" -n 1 sh -c "$obj" "$work" ||
    ! ar rcs "$work/libmemra-fuzz.a" "$work/lib/"*.o; then
	echo "fuzz: lib/ did not build for the fuzzers"
	exit 1
fi

names=
for f in t/fuzz/*.c; do
	name=$(basename "$f" .c)
	[ "$name" = replay ] && continue
	if ! $cc $cflags $san -fsanitize=fuzzer -o "$work/fuzz-$name" "$f" "$work/libmemra-fuzz.a" \
	    $libs 2>"$work/$name.build.log"; then
		echo "fuzz: $name: build failed:"; cat "$work/$name.build.log"; rc=1; continue
	fi
	rm -rf "$work/$name" && mkdir -p "$work/$name"
	[ -d "t/fuzz/$name" ] && cp t/fuzz/"$name"/* "$work/$name/" 2>/dev/null
	names="$names $name"
done

# run one target; its verdict in $name.rc
fuzz_one() {
	(cd "$work" && ./fuzz-"$1" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
	    -artifact_prefix="$1-" "$1" >"$1.log" 2>&1)
	echo $? >"$work/$1.rc"
}

set -- $names
while [ $# -gt 0 ]; do
	batch=
	i=0
	while [ $# -gt 0 ] && [ $i -lt "$jobs" ]; do
		batch="$batch $1"
		shift
		i=$((i + 1))
	done
	for name in $batch; do
		echo "fuzz: $name for ${secs}s"
		fuzz_one "$name" &
	done
	wait
	for name in $batch; do
		if [ "$(cat "$work/$name.rc")" != 0 ]; then
			echo "fuzz: $name: crash found:"; tail -40 "$work/$name.log"; rc=1
		else
			tail -1 "$work/$name.log"
		fi
	done
done
exit $rc
