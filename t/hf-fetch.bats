bats_require_minimum_version 1.5.0

# Every test runs against t/fakehub.py on loopback; each request it served is
# one line of $LOG: METHOD PATH RANGE STATUS BYTES_SENT AUTH INFLIGHT.

setup() {
	load helper
	ROOT=$BATS_TEST_TMPDIR/root
	HUB=$HF_HOME/hub
	M=$ROOT/models/o/r
	mkdir -p "$M" "$ROOT/datasets/o/d/sub"
	head -c 300000 /dev/urandom >"$M/m-Q5K-mtp.gguf"
	head -c 2000 /dev/urandom >"$M/m-Q8_0.gguf"
	printf '{"model_type": "x"}\n' >"$M/config.json"
	for k in 1 2 3; do head -c 3000 /dev/urandom >"$M/big-0000$k-of-00003.gguf"; done
	echo '{"p": 1}' >"$ROOT/datasets/o/d/train.jsonl"
	echo '{"p": 2}' >"$ROOT/datasets/o/d/sub/test.jsonl"
	echo 'a dataset' >"$ROOT/datasets/o/d/README.md"
}

teardown() {
	if [ -n "${HUB_PID:-}" ]; then
		kill "$HUB_PID" 2>/dev/null
		wait "$HUB_PID" 2>/dev/null
	fi
	true
}

# hub_start [KNOB...]: serve $ROOT and point HF_ENDPOINT at it
hub_start() {
	LOG=$BATS_TEST_TMPDIR/hub.log
	rm -f "$BATS_TEST_TMPDIR/port"
	python3 "$TOP/t/fakehub.py" --root "$ROOT" --port-file "$BATS_TEST_TMPDIR/port" --log "$LOG" "$@" 3>&- &
	HUB_PID=$!
	for _ in $(seq 200); do [ -s "$BATS_TEST_TMPDIR/port" ] && break; sleep 0.05; done
	[ -s "$BATS_TEST_TMPDIR/port" ]
	export HF_ENDPOINT="http://127.0.0.1:$(cat "$BATS_TEST_TMPDIR/port")"
	: >"$LOG"
}

# sent REGEX: body bytes the hub sent on requests whose path matches
sent() { awk -F'\t' -v re="$1" '$2 ~ re { s += $5 } END { print s + 0 }' "$LOG"; }
# nreq [REGEX]: requests served (whose path matches)
nreq() { awk -F'\t' -v re="${1:-.}" '$2 ~ re { n++ } END { print n + 0 }' "$LOG"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# peak: the most file bodies the hub was sending at once
peak() { awk -F'\t' '$7 > m { m = $7 } END { print m + 0 }' "$LOG"; }

@test "a substring names one file: its snapshot path is printed, linked to its blob" {
	hub_start
	run -0 --separate-stderr hf-fetch hf:o/r:Q5K-mtp
	[ "${#lines[@]}" -eq 1 ]
	commit=$(cat "$HUB/models--o--r/refs/main")
	[[ $commit =~ ^[0-9a-f]{40}$ ]]
	[ "$output" = "$HUB/models--o--r/snapshots/$commit/m-Q5K-mtp.gguf" ]
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	[ "$(readlink "$output")" = "../../blobs/$(sha "$M/m-Q5K-mtp.gguf")" ]
	[ -f "$HUB/models--o--r/trees/$commit.json" ]
	[ -f "$HUB/CACHEDIR.TAG" ]
	[ -z "$stderr" ]	# quiet when stderr is not a tty
}

@test "a cached spec resolves again without any request" {
	hub_start
	run -0 hf-fetch hf:o/r:Q5K-mtp
	first=$output
	n=$(nreq)
	run -0 hf-fetch hf:o/r:Q5K-mtp
	[ "$output" = "$first" ]
	[ "$(nreq)" -eq "$n" ]
}

@test "--refresh follows a branch that moved; without it the cache answers" {
	hub_start
	run -0 hf-fetch hf:o/r:config.json
	old=$output
	kill "$HUB_PID"; wait "$HUB_PID" 2>/dev/null || true
	printf '{"model_type": "y"}\n' >"$M/config.json"
	hub_start
	run -0 hf-fetch hf:o/r:config.json
	[ "$output" = "$old" ]
	[ "$(nreq)" -eq 0 ]
	run -0 hf-fetch -f hf:o/r:config.json
	[ "$output" != "$old" ]
	cmp "$output" "$M/config.json"
	[ "$(nreq '^/cdn/')" -eq 0 ]	# the big files did not move: nothing else fetched
	# a cache hit without a tree listing still reports sizes
	rm -rf "$HUB/models--o--r/trees"
	run -0 --separate-stderr hf-fetch -n hf:o/r:config.json
	[[ $output == "cached	20	$HUB/models--o--r/snapshots/"*/config.json ]]
}

@test "a plain git file is fetched from resolve and named by its git blob id" {
	hub_start
	run -0 hf-fetch hf:o/r:config.json
	cmp "$output" "$M/config.json"
	oid=$(python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "$M/config.json")
	[ "$(readlink "$output")" = "../../blobs/$oid" ]
}

@test "a whole repo prints its snapshot directory, --include and --exclude filter it" {
	hub_start
	run -0 hf-fetch --include '*.gguf' --exclude 'big-*' hf:o/r
	[ "${#lines[@]}" -eq 1 ]
	[ -d "$output" ]
	[ "$(cd "$output" && ls | tr '\n' ' ')" = "m-Q5K-mtp.gguf m-Q8_0.gguf " ]
	run -0 hf-fetch hf:o/r
	[ "$(cd "$output" && ls | wc -l)" -eq 6 ]
	cmp "$output/big-00002-of-00003.gguf" "$M/big-00002-of-00003.gguf"
}

@test "an ambiguous substring fails with 1 and lists the candidates" {
	hub_start
	run -1 --separate-stderr hf-fetch hf:o/r:gguf
	[ -z "$output" ]
	[[ $stderr == "hf-fetch: hf:o/r:gguf: 'gguf' matches 5 files: "* ]]
	[[ $stderr == *"'m-Q5K-mtp.gguf'"* && $stderr == *"'m-Q8_0.gguf'"* ]]
}

@test "a substring that matches nothing fails with 1 and lists the files" {
	hub_start
	run -1 --separate-stderr hf-fetch hf:o/r:Q4_K
	[[ $stderr == "hf-fetch: hf:o/r:Q4_K: no file name contains 'Q4_K' (6 files): "*"'config.json'"* ]]
}

@test "a file named exactly by the substring wins over longer names (cookbook ranks files)" {
	mkdir -p "$ROOT/models/o/ranks"
	seq 1 300 >"$ROOT/models/o/ranks/q38-ranks-sxc32768.gguf.txt"
	head -c 1500 /dev/urandom >"$ROOT/models/o/ranks/q38-ranks-sxc32768.gguf"
	hub_start
	run -0 hf-fetch hf:o/ranks:q38-ranks-sxc32768.gguf hf:o/ranks:q38-ranks-sxc32768.gguf.txt
	[[ ${lines[0]} == */q38-ranks-sxc32768.gguf && ${lines[1]} == */q38-ranks-sxc32768.gguf.txt ]]
	cmp "${lines[0]}" "$ROOT/models/o/ranks/q38-ranks-sxc32768.gguf"
	run -1 hf-fetch hf:o/ranks:sxc32768
}

@test "a split GGUF fetches every part and prints the first" {
	hub_start
	run -0 hf-fetch hf:o/r:big-00002
	[[ $output == */big-00001-of-00003.gguf ]]
	d=${output%/*}
	for k in 1 2 3; do cmp "$d/big-0000$k-of-00003.gguf" "$M/big-0000$k-of-00003.gguf"; done
	[ "$(nreq '^/cdn/')" -eq 3 ]
}

@test "owner/repo/path names one file exactly; a split part there fetches its whole set" {
	hub_start
	run -0 hf-fetch hf:o/r/m-Q8_0.gguf hf:o/r/big-00003-of-00003.gguf
	[[ ${lines[0]} == "$HUB/models--o--r/snapshots/"*/m-Q8_0.gguf ]]
	[[ ${lines[1]} == */big-00001-of-00003.gguf ]]
	d=${lines[1]%/*}
	for k in 1 2 3; do cmp "$d/big-0000$k-of-00003.gguf" "$M/big-0000$k-of-00003.gguf"; done
	run -1 --separate-stderr hf-fetch hf:o/r/Q8_0
	[[ $stderr == "hf-fetch: hf:o/r/Q8_0: no file 'Q8_0' (6 files): "* ]]
}

@test "a split set with a part missing from the repo fails with 1 naming the part, fetching nothing" {
	rm "$M/big-00002-of-00003.gguf"
	hub_start
	for s in hf:o/r/big-00001-of-00003.gguf hf:o/r:big-00003; do
		run -1 --separate-stderr hf-fetch "$s"
		[ "$stderr" = "hf-fetch: $s: split part 'big-00002-of-00003.gguf' (2 of 3) is missing" ]
	done
	[ "$(nreq '^/cdn/')" -eq 0 ]
	[ -z "$(find "$HUB" -name 'big-*')" ]
}

@test "offline, a split set with a part missing from the cache fails with 1 naming the part" {
	hub_start
	run -0 hf-fetch hf:o/r:big-00001
	rm "${output%/*}/big-00002-of-00003.gguf" "$HUB/models--o--r/trees/"*.json
	HF_HUB_OFFLINE=1 run -1 --separate-stderr hf-fetch hf:o/r/big-00001-of-00003.gguf
	[ "$stderr" = "hf-fetch: hf:o/r/big-00001-of-00003.gguf: split part 'big-00002-of-00003.gguf' (2 of 3) is missing" ]
	run -0 hf-fetch hf:o/r/big-00001-of-00003.gguf	# online it fetches the part again
	cmp "${output%/*}/big-00002-of-00003.gguf" "$M/big-00002-of-00003.gguf"
}

@test "an interrupted fetch of a split set resumes every part and re-sends only the rest" {
	for k in 1 2 3; do head -c 200000 /dev/urandom >"$M/big-0000$k-of-00003.gguf"; done
	hub_start --cut 100000 --cut-times 3
	run -1 --separate-stderr hf-fetch -j 3 --retries 0 hf:o/r/big-00002-of-00003.gguf
	[ -n "$(find "$HUB/models--o--r/blobs" -name '*.incomplete')" ]
	run -0 hf-fetch hf:o/r/big-00002-of-00003.gguf
	d=${output%/*}
	for k in 1 2 3; do cmp "$d/big-0000$k-of-00003.gguf" "$M/big-0000$k-of-00003.gguf"; done
	[ -z "$(find "$HUB/models--o--r/blobs" -name '*.incomplete')" ]
	[ "$(sent '^/cdn/')" -eq 600000 ]
	grep -q "	bytes=100000-199999	206	100000	" "$LOG"
}

@test "hfds: a dataset glob prints each matching file; no glob prints the snapshot" {
	hub_start
	run -0 hf-fetch 'hfds:o/d:*.jsonl'
	[ "${#lines[@]}" -eq 2 ]
	[[ ${lines[0]} == "$HUB/datasets--o--d/snapshots/"*/sub/test.jsonl ]]
	[[ ${lines[1]} == */train.jsonl ]]
	cmp "${lines[0]}" "$ROOT/datasets/o/d/sub/test.jsonl"
	[ "$(readlink "${lines[0]}")" = "../../../blobs/$(python3 -c 'import hashlib,sys; d=open(sys.argv[1],"rb").read(); print(hashlib.sha1(b"blob %d\0" % len(d) + d).hexdigest())' "${lines[0]}")" ]
	grep -q '^GET	/api/datasets/o/d/revision/main' "$LOG"
	run -0 hf-fetch hfds:o/d
	[ -f "$output/README.md" ]
}

@test "@revision pins a commit and writes no ref for it" {
	hub_start
	run -0 hf-fetch hf:o/r:Q8_0
	commit=$(cat "$HUB/models--o--r/refs/main")
	rm -rf "$HF_HOME"
	run -0 hf-fetch "hf:o/r@$commit:Q8_0"
	[ "$output" = "$HUB/models--o--r/snapshots/$commit/m-Q8_0.gguf" ]
	[ ! -e "$HUB/models--o--r/refs/$commit" ]
	run -0 hf-fetch --revision main hf:o/r:Q8_0
	run -1 --separate-stderr hf-fetch hf:o/r@v9:Q8_0
	[[ $stderr == *"HTTP 404 (RevisionNotFound)"* ]]
}

@test "HF_HUB_OFFLINE=1 resolves from the cache alone; a miss names the spec" {
	hub_start
	run -0 hf-fetch hf:o/r:Q5K-mtp
	want=$output
	n=$(nreq)
	HF_HUB_OFFLINE=1 run -0 hf-fetch hf:o/r:Q5K-mtp
	[ "$output" = "$want" ]
	HF_HUB_OFFLINE=1 run -1 --separate-stderr hf-fetch hf:o/r:Q8_0
	[[ $stderr == "hf-fetch: hf:o/r:Q8_0: "*"(HF_HUB_OFFLINE is set)" ]]
	# the listing says the snapshot lacks files: incomplete, as huggingface_hub says
	HF_HUB_OFFLINE=1 run -1 hf-fetch hf:o/r
	[ "$(nreq)" -eq "$n" ]
}

@test "an interrupted download resumes from .incomplete and re-sends only the rest" {
	hub_start --cut 100000 --cut-times 1
	run -1 --separate-stderr hf-fetch --retries 0 hf:o/r:Q5K-mtp
	inc=$HUB/models--o--r/blobs/$(sha "$M/m-Q5K-mtp.gguf").incomplete
	[ "$(stat -c %s "$inc")" -eq 100000 ]
	run -0 hf-fetch hf:o/r:Q5K-mtp
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	[ ! -e "$inc" ]
	[ "$(sent '^/cdn/')" -eq 300000 ]
	grep -q "	bytes=100000-299999	206	200000	" "$LOG"
}

@test "a connection cut mid-file is retried in the same run with a Range request" {
	hub_start --cut 50000 --cut-times 2
	run -0 hf-fetch hf:o/r:Q5K-mtp
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	[ "$(sent '^/cdn/')" -eq 300000 ]
	[ "$(nreq '^/cdn/')" -eq 3 ]
}

@test "429 waits for Retry-After, then succeeds" {
	hub_start --s429 1 --retry-after 1
	start=$(date +%s.%N)
	run -0 --separate-stderr hf-fetch -v hf:o/r:Q8_0
	awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { exit !(b - a >= 1) }'
	[[ $stderr == *"HTTP 429"*"retry in 1s"* ]]
	cmp "$output" "$M/m-Q8_0.gguf"
}

@test "500s are retried with backoff; past --retries they fail with 1" {
	hub_start --fail500 2
	run -0 hf-fetch hf:o/r:Q8_0
	cmp "$output" "$M/m-Q8_0.gguf"
	kill "$HUB_PID"; wait "$HUB_PID" 2>/dev/null || true
	rm -rf "$HF_HOME"
	hub_start --fail500 100
	run -1 --separate-stderr hf-fetch --retries 1 hf:o/r:Q8_0
	[[ $stderr == *"HTTP 500 (gave up after 1 retries)" ]]
	[ "$(nreq)" -eq 2 ]
}

@test "a sha256 mismatch deletes the download and fails with 1" {
	hub_start --corrupt m-Q5K-mtp.gguf
	run -1 --separate-stderr hf-fetch hf:o/r:Q5K-mtp
	[[ $stderr == *"'m-Q5K-mtp.gguf': sha256 mismatch: expected $(sha "$M/m-Q5K-mtp.gguf"), got "* ]]
	[ -z "$(ls "$HUB/models--o--r/blobs")" ]
	[ -z "$(ls -A "$HUB/models--o--r/snapshots/"* 2>/dev/null)" ]
}

@test "a token is sent to the hub, never to the CDN, and never printed" {
	hub_start --auth s3cret-tok
	run -1 --separate-stderr hf-fetch hf:o/r:Q5K-mtp
	[[ $stderr == *"HTTP 401"*"HF_TOKEN"* ]]
	HF_TOKEN=s3cret-tok run -0 --separate-stderr hf-fetch -v hf:o/r:Q5K-mtp
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	[[ $output$stderr != *s3cret* ]]
	[ "$(awk -F'\t' '$2 !~ /^\/cdn\// && $6 != "good"' "$LOG" | grep -c .)" -eq 1 ]	# the refused one
	[ "$(awk -F'\t' '$2 ~ /^\/cdn\// && $6 != "none"' "$LOG" | grep -c .)" -eq 0 ]
	run -1 --separate-stderr env HF_TOKEN=wrong hf-fetch --token bad-tok hf:o/r:Q8_0
	[[ $stderr != *bad-tok* ]]
	run -0 env HF_TOKEN=wrong hf-fetch --token s3cret-tok hf:o/r:Q8_0
	# --token is blanked out of the process list while it runs
	kill "$HUB_PID"; wait "$HUB_PID" 2>/dev/null || true
	hub_start --auth s3cret-tok --slow 100000
	HF_HOME=$BATS_TEST_TMPDIR/h2 hf-fetch --token s3cret-tok hf:o/r:Q5K-mtp >/dev/null 2>&1 3>&- &
	pid=$!
	sleep 0.5
	cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
	kill "$pid"; wait "$pid" || true
	[[ $cmd == "hf-fetch --token ********** hf:o/r:Q5K-mtp " ]]
	echo s3cret-tok >"$HF_HOME/token"
	run -0 hf-fetch hf:o/r:big-00001
}

@test "redirects within the hub are followed" {
	hub_start --redirects 3
	run -0 hf-fetch hf:o/r:Q5K-mtp hf:o/r:config.json
	cmp "${lines[0]}" "$M/m-Q5K-mtp.gguf"
	cmp "${lines[1]}" "$M/config.json"
	[ "$(nreq '^/hop/')" -ge 6 ]
}

@test "a large file arrives over parallel Range requests" {
	hub_start --slow 250000
	run -0 hf-fetch --chunk-size 65536 -c 4 hf:o/r:Q5K-mtp
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	[ "$(nreq '^/cdn/')" -eq 5 ]
	[ "$(awk -F'\t' '$2 ~ /^\/cdn\// && $4 == 206' "$LOG" | wc -l)" -eq 5 ]
	[ "$(sent '^/cdn/')" -eq 300000 ]
	[ "$(peak)" -ge 2 ]
}

@test "a repository arrives several files at a time, and one at a time with -j 1" {
	hub_start --slow 20000
	run -0 hf-fetch -j 3 hf:o/r:big
	[ "$(peak)" -ge 2 ]
	rm -rf "$HF_HOME"
	: >"$LOG"
	run -0 hf-fetch -j 1 hf:o/r:big
	[ "$(peak)" -eq 1 ]
}

@test "a progress line shows bytes, rate and ETA on a terminal" {
	command -v script >/dev/null || skip "script(1) not installed"
	hub_start --slow 600000
	run -0 script -qec "hf-fetch hf:o/r:Q5K-mtp" /dev/null
	[[ $output == *"hf:o/r:Q5K-mtp: 300.0k/300.0k (100%) "*"/s eta 0s"* ]]
	run -0 script -qec "hf-fetch -q hf:o/r:Q8_0" /dev/null
	[[ $output != *"(100%)"* ]]
}

@test "a server that ignores Range gets one whole-file request instead" {
	hub_start --no-range
	run -0 hf-fetch --chunk-size 65536 -c 4 hf:o/r:Q5K-mtp
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	[ "$(awk -F'\t' '$2 ~ /^\/cdn\// && $3 == "-"' "$LOG" | wc -l)" -eq 1 ]
}

@test "two concurrent fetches of one file share one download" {
	hub_start --slow 400000
	hf-fetch hf:o/r:Q5K-mtp >"$BATS_TEST_TMPDIR/a" 2>&1 3>&- &
	a=$!
	hf-fetch hf:o/r:Q5K-mtp >"$BATS_TEST_TMPDIR/b" 2>&1 3>&- &
	b=$!
	wait "$a"
	wait "$b"
	[ "$(cat "$BATS_TEST_TMPDIR/a")" = "$(cat "$BATS_TEST_TMPDIR/b")" ]
	cmp "$(cat "$BATS_TEST_TMPDIR/a")" "$M/m-Q5K-mtp.gguf"
	[ "$(sent '^/cdn/')" -eq 300000 ]
	[ -f "$HUB/.locks/models--o--r/$(sha "$M/m-Q5K-mtp.gguf").lock" ]
}

@test "--dry-run lists what it would fetch with sizes and writes nothing" {
	hub_start
	run -0 hf-fetch hf:o/r:Q8_0
	: >"$LOG"
	run -0 --separate-stderr hf-fetch -n --include '*.gguf' hf:o/r
	[ "${#lines[@]}" -eq 5 ]
	[[ ${lines[0]} == "fetch	3000	$HUB/models--o--r/snapshots/"*"/big-00001-of-00003.gguf" ]]
	[[ ${lines[3]} == "fetch	300000	"*"/m-Q5K-mtp.gguf" ]]
	[[ ${lines[4]} == "cached	2000	"*"/m-Q8_0.gguf" ]]
	[ "$stderr" = "hf-fetch: dry run: 4 of 5 files to fetch, 309000 bytes" ]
	[ "$(nreq '^/cdn/')" -eq 0 ]
	[ ! -e "$(echo "${lines[3]}" | cut -f3)" ]
}

@test "misuse exits 2" {
	run -2 hf-fetch
	run -2 --separate-stderr hf-fetch o/r:Q5K
	[[ $stderr == "hf-fetch: o/r:Q5K: not an hf: or hfds: spec"* ]]
	run -2 hf-fetch hf:o/r/../x
	run -2 hf-fetch hf:o/r/
	run -2 hf-fetch 'hf:o/r@../x:y'
	run -2 hf-fetch hf:o/r:
	run -2 hf-fetch --retries -1 hf:o/r
	run -2 hf-fetch -c 0 hf:o/r
	run -2 hf-fetch --bogus hf:o/r
	run -0 hf-fetch --help
	[[ ${lines[0]} == "usage: hf-fetch "* ]]
}

@test "--help matches the man page SYNOPSIS" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	syn=$(mandoc -Tascii "$TOP/man/hf-fetch.1" | sed 's/.\x08//g' | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
	    sed '1d;$d' | tr -s ' \n\t' ' ')
	use=$(hf-fetch --help | sed 's/^usage: //' | tr -s ' \n\t' ' ')
	[ "$syn" = " $use" ]
}

@test "an unreachable hub fails with 1 naming the spec" {
	export HF_ENDPOINT=http://127.0.0.1:9
	run -1 --separate-stderr hf-fetch --retries 0 hf:o/r:Q5K
	[[ $stderr == "hf-fetch: hf:o/r:Q5K: "*"127.0.0.1:9"* ]]
}

@test "an endpoint that is not a hub is reported as such" {
	hub_start
	run -1 --separate-stderr env HF_ENDPOINT="$HF_ENDPOINT/cdn" hf-fetch --retries 0 hf:o/r:Q5K
	[[ $stderr == *"HTTP 404"* ]]
}

@test "a build without libcurl resolves cached specs and says why it cannot fetch" {
	hub_start
	run -0 hf-fetch hf:o/r:Q5K-mtp
	want=$output
	nc=$BATS_TEST_TMPDIR/hf-fetch-nocurl
	cc -std=c11 -D_GNU_SOURCE -O0 -pthread -I"$TOP/lib" -o "$nc" "$TOP/bin/hf-fetch.c" \
	    "$TOP/lib/hub.c" "$TOP/lib/hub_net.c" "$TOP/lib/json.c" "$TOP/lib/sha256.c" "$TOP/lib/util.c" -lm
	run -0 "$nc" hf:o/r:Q5K-mtp
	[ "$output" = "$want" ]
	run -1 --separate-stderr "$nc" hf:o/r:Q8_0
	[[ $stderr == *"hf:o/r:Q8_0: not in the cache "*"hf: specs need a libcurl build"* ]]
}

# --- peer: huggingface_hub against the same fake hub ---

@test "peer: huggingface_hub reuses our download without a request, and we reuse its" {
	need_py huggingface_hub
	hub_start
	run -0 hf-fetch hf:o/r:Q5K-mtp
	ours=$output
	n=$(nreq)
	HF_HUB_OFFLINE=1 run -0 python3 "$TOP/t/peer/hf_download.py" o/r m-Q5K-mtp.gguf
	[ "${lines[-1]}" = "$ours" ]
	[ "$(nreq)" -eq "$n" ]
	run -0 python3 "$TOP/t/peer/hf_download.py" o/r m-Q5K-mtp.gguf	# online: a HEAD, no bytes
	[ "${lines[-1]}" = "$ours" ]
	[ "$(nreq '^/cdn/')" -eq 1 ]
	run -0 python3 "$TOP/t/peer/hf_download.py" o/r m-Q8_0.gguf
	theirs=${lines[-1]}
	n=$(nreq)
	run -0 hf-fetch hf:o/r:Q8_0
	[ "$output" = "$theirs" ]
	[ "$(nreq)" -eq "$n" ]
	run -0 hf-fetch hf:o/r:Q8_0
}

@test "peer: huggingface_hub and hf-fetch build the same cache tree" {
	need_py huggingface_hub
	hub_start
	HF_HOME=$BATS_TEST_TMPDIR/theirs run -0 python3 "$TOP/t/peer/hf_download.py" o/r
	HF_HOME=$BATS_TEST_TMPDIR/theirs run -0 python3 "$TOP/t/peer/hf_download.py" --dataset o/d
	HF_HOME=$BATS_TEST_TMPDIR/ours run -0 hf-fetch hf:o/r hfds:o/d
	run -0 diff <(python3 "$TOP/t/peer/cache_tree.py" "$BATS_TEST_TMPDIR/theirs/hub") \
	    <(python3 "$TOP/t/peer/cache_tree.py" "$BATS_TEST_TMPDIR/ours/hub")
	# and each side reads the other's whole snapshot offline
	HF_HOME=$BATS_TEST_TMPDIR/theirs HF_HUB_OFFLINE=1 run -0 hf-fetch hf:o/r
	HF_HOME=$BATS_TEST_TMPDIR/ours HF_HUB_OFFLINE=1 run -0 python3 "$TOP/t/peer/hf_download.py" o/r
}

@test "SIGTERM stops a transfer, keeps its prefix, and the next run resumes" {
	hub_start --slow 100000
	hf-fetch hf:o/r:Q5K-mtp >"$BATS_TEST_TMPDIR/out" 2>"$BATS_TEST_TMPDIR/err" 3>&- &
	pid=$!
	inc=$HUB/models--o--r/blobs/$(sha "$M/m-Q5K-mtp.gguf").incomplete
	for _ in $(seq 100); do [ -s "$inc" ] && break; sleep 0.05; done
	sleep 0.3
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	[ "$rc" -eq 1 ]
	grep -q 'interrupted' "$BATS_TEST_TMPDIR/err"
	have=$(stat -c %s "$inc")
	[ "$have" -gt 0 ]
	[ "$have" -lt 300000 ]
	kill "$HUB_PID"; wait "$HUB_PID" 2>/dev/null || true
	hub_start
	run -0 hf-fetch hf:o/r:Q5K-mtp
	cmp "$output" "$M/m-Q5K-mtp.gguf"
	grep -q "	bytes=$have-299999	206	$((300000 - have))	" "$LOG"
}

@test "run-gen takes an hf: spec for its model and says what the local path says" {
	command -v run-gen >/dev/null || skip "run-gen not built in this tree"
	a=$(model_a)
	mkdir -p "$ROOT/models/o"
	ln -s "$a" "$ROOT/models/o/a"
	hub_start
	run -0 --separate-stderr run-gen "$a" "Hello"
	want=$output
	run -0 --separate-stderr run-gen hf:o/a "Hello"
	[ "$output" = "$want" ]
	[ "$(nreq '\.safetensors$|^/cdn/')" -ge 3 ]
}

@test "a model spec naming any part of a split GGUF set opens the whole set: the local set's ids and logits" {
	command -v run-gen >/dev/null || skip "run-gen not built in this tree"
	[ -x "$TOP/build/t/tools/gguf-split" ] && [ -x "$TOP/build/t/tools/model-logits" ] ||
		skip "build/t/tools not built (make units)"
	f=$(smollm2)
	s=$ROOT/models/o/s/sm
	mkdir -p "$ROOT/models/o/s"
	"$TOP/build/t/tools/gguf-split" 3 "$f" "$s"
	hub_start
	ids="5 17 250 3 99 42 7 1"
	"$TOP/build/t/tools/model-logits" -t 2 "$s-00001-of-00003.gguf" "$BATS_TEST_TMPDIR/local" $ids
	"$TOP/build/t/tools/model-logits" -t 2 hf:o/s/sm-00002-of-00003.gguf "$BATS_TEST_TMPDIR/hub" $ids
	cmp "$BATS_TEST_TMPDIR/local" "$BATS_TEST_TMPDIR/hub"
	[ "$(nreq '^/cdn/')" -eq 3 ]
	d=$(echo "$HUB"/models--o--s/snapshots/*)
	for k in 1 2 3; do cmp "$d/sm-0000$k-of-00003.gguf" "$s-0000$k-of-00003.gguf"; done
	run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$s-00003-of-00003.gguf" "The capital of France is"
	want=$output
	[ -n "$want" ]
	for spec in hf:o/s/sm-00003-of-00003.gguf hf:o/s:sm-00001; do
		run -0 --separate-stderr run-gen --raw --ids -n 8 -t 2 "$spec" "The capital of France is"
		[ "$output" = "$want" ]
	done
	[ "$(nreq)" -eq 7 ]	# the cache answered both: no request past the first fetch
}

@test "MEMRA_FRSPEC_TRIM takes an hf: spec for the rank list" {
	command -v run-gen >/dev/null || skip "run-gen not built in this tree"
	a=$(model_a)
	mkdir -p "$ROOT/models/o/ranks"
	seq 0 511 >"$ROOT/models/o/ranks/a-ranks-512.txt"
	hub_start
	MEMRA_FRSPEC_TRIM=hf:o/ranks:ranks-512 run -0 --separate-stderr run-gen -n 4 "$a" "Hello"
	[[ $stderr == *"[frspec-trim] self-trimmed head: 512 rows of main output.weight"* ]]
	[ "$(nreq 'ranks-512')" -ge 1 ]
}

@test "HF_HUB_CACHE names the cache directory" {
	hub_start
	HF_HUB_CACHE=$BATS_TEST_TMPDIR/elsewhere run -0 hf-fetch hf:o/r:Q8_0
	[[ $output == "$BATS_TEST_TMPDIR/elsewhere/models--o--r/snapshots/"*/m-Q8_0.gguf ]]
	[ ! -e "$HUB" ]
}
