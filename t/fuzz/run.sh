#!/bin/sh
# run.sh CC SECONDS: build each t/fuzz/<target>.c as a libFuzzer binary and run it
# for SECONDS on a scratch copy of its corpus t/fuzz/<target>/.  A crash fails the run;
# the crasher is left in t/fuzz/corpus-work/ to be added to t/fuzz/<target>/ as a fixture.
cc=${1:-clang} secs=${2:-30}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 2
work=t/fuzz/corpus-work
mkdir -p "$work"
src=$(ls lib/*.c)
rc=0
for f in t/fuzz/*.c; do
	name=$(basename "$f" .c)
	[ "$name" = replay ] && continue
	bin=$work/fuzz-$name
	if ! $cc -std=c11 -D_GNU_SOURCE -g -O1 -Ilib -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=undefined -o "$bin" "$f" $src $(pkg-config --cflags --libs libpng libjpeg) -lm -pthread 2>"$work/$name.build.log"; then
		echo "fuzz: $name: build failed:"; cat "$work/$name.build.log"; rc=1; continue
	fi
	rm -rf "$work/$name" && mkdir -p "$work/$name"
	[ -d "t/fuzz/$name" ] && cp t/fuzz/"$name"/* "$work/$name/" 2>/dev/null
	echo "fuzz: $name for ${secs}s"
	if ! (cd "$work" && ./fuzz-"$name" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 \
	    -artifact_prefix="$name-" "$name" >"$name.log" 2>&1); then
		echo "fuzz: $name: crash found:"; tail -40 "$work/$name.log"; rc=1
	else
		tail -1 "$work/$name.log"
	fi
done
exit $rc
