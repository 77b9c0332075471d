# shellcheck shell=sh disable=SC2154
# spec-replay.sh: sourced by tools/spec-replay-bench.sh and tools/gpu-dflash-bench.sh
# (not run); both set top (the checkout) first.
#
# replay_abba OUT TAG PLAIN REPLAY MODEL QUANT SCENARIO: tools/abba, A B B A
# ($BLOCKS blocks, default 1), of A = PLAIN (run-spec --trace-in TRACE
# --trace-arm plain ...: plain decoding of the trace's prompts) against B =
# REPLAY (--trace-arm replay: the trace's rounds), the figure each run's
# tok_s from its TSV row.  The receipt row (B's tok/s, A's as the peer
# plain-decode, the ratio B / A; DESIGN.md's columns, tools/abba's) is
# appended to OUT/replay.tsv, the runs go to OUT/replay-TAG.log and abba's
# report to OUT/abba-TAG.txt.  Prints TAG's summary fields, tab-separated,
# no newline: A's median, B's, the ratio, then the replay's row's mean_len,
# accepted, drafted, rounds and agree (its first run's).  1, with abba's
# report on standard error, when abba fails.
replay_abba() {
	python3 "$top/tools/abba" -a "$3" -b "$4" \
	    -r '(?m)^(?:plain|replay)\t[0-9]+\t([0-9.]+)\t' --unit tok/s --blocks "${BLOCKS:-1}" \
	    --tsv "$1/replay.tsv" --log "$1/replay-$2.log" --binary run-spec \
	    --model "$5" --quant "$6" --scenario "$7" --peer plain-decode >"$1/abba-$2.txt" 2>&1 ||
	    { cat "$1/abba-$2.txt" >&2; return 1; }
	awk -F'\t' '
	    /^A: median/ { split($0, w, " "); pa = w[3] }
	    /^B: median/ { split($0, w, " "); pb = w[3] }
	    /^ratio/ { split($0, w, " "); r = w[3] }
	    END { printf "%s\t%s\t%s", pa, pb, r }' "$1/abba-$2.txt"
	awk -F'\t' '$1 == "replay" && !done { printf "\t%s\t%s\t%s\t%s\t%s", $10, $9, $8, $7, $11;
	    done = 1 }' "$1/replay-$2.log"
}

# receipt_gpu: the device a receipt row names, as tools/abba's gpu_name does
# (the GPU's name, else cpu:MODEL, blanks as _).
receipt_gpu() {
	_g=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) || _g=
	[ -n "$_g" ] || _g=$(grep -m1 'model name' /proc/cpuinfo | sed 's/^[^:]*: *//; s/^/cpu:/')
	echo "${_g:-cpu}" | sed 's/ *$//; s/ /_/g'
}
