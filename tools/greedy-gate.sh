#!/bin/sh
# greedy-gate.sh: greedy ids of a model on a device against the reference
# ids (t/data/a-greedy.tsv: prompt ids, reference ids, min top-2 margin) and
# against the CPU backend.  One line per prompt and mode, then PASS or FAIL.
#   usage: sh tools/greedy-gate.sh MODEL DEVICE [CASES]
# Modes: "step" feeds the prompt token by token, "prefill" in one forward.
# A prompt whose ids differ from the CPU's only after a step whose reference
# margin is below 1e-3 would be a near-tie; these cases have none, so any
# difference fails.
set -u
model=$1 dev=$2 cases=${3:-t/data/a-greedy.tsv}
mg=${MG:-build/t/tools/model-greedy}
fail=0 i=0
while IFS="$(printf '\t')" read -r prompt ref margin; do
	for mode in step prefill; do
		flag=; [ $mode = prefill ] && flag=-p
		got=$($mg $flag -d "$dev" "$model" 64 $prompt) || { echo "prompt $i $mode: $dev failed"; fail=1; continue; }
		cpu=$($mg $flag -d cpu "$model" 64 $prompt) || { echo "prompt $i $mode: cpu failed"; fail=1; continue; }
		r1=same r2=same
		[ "$got" = "$ref" ] || r1=DIFF
		[ "$got" = "$cpu" ] || { r2=DIFF; fail=1; }
		first=$(printf '%s\n%s\n' "$got" "$cpu" | awk 'NR==1{n=split($0,a," ")} NR==2{split($0,b," "); for(i=1;i<=n;i++) if(a[i]!=b[i]){print i-1; exit} print "-"}')
		echo "prompt $i $mode: $dev=ref $r1, $dev=cpu $r2 (first cpu difference at $first, ref min margin $margin)"
	done
	i=$((i + 1))
done <"$cases"
[ $fail = 0 ] && echo "GREEDY GATE PASS ($dev = cpu on $i prompts x 2 modes x 64 ids)" || echo "GREEDY GATE FAIL"
exit $fail
