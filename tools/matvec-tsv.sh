#!/bin/sh
# matvec-tsv.sh: turn a `kernel-check --bench` log into bench/ TSV rows
# (for bench/DATE/DATE-topic.tsv, with the log copied beside it: the log
# column holds its base name)
# (DESIGN.md columns; median = GB/s of weights read, peer = the measured
# device-to-device copy, ratio = median / copy).
#   usage: sh tools/matvec-tsv.sh LOG DATE COMMIT [header]
log=$1 date=$2 commit=$3
[ "${4:-}" = header ] && printf 'date\tcommit\tgpu\tbinary\tmodel\tquant\tscenario\tctx\tn\tmedian\tmin\tmax\tunit\tpeer\tpeer_median\tratio\tlog\n'
awk -v date="$date" -v commit="$commit" -v logname="$(basename "$log")" '
/^bench device / { sub(/^bench device /, ""); gpu = $1 " " $2; next }
/^bench chunk / { chunk = $3; next }
/^bench copy / { copy = $(NF - 2); next }
/^bench [A-Z0-9_]+ +[0-9]+x[0-9]+ +m=/ {
	m = $4; sub(/m=/, "", m)
	scen = "matvec-m" m (chunk && chunk != 2560 ? "-c" chunk : "")
	printf "%s\t%s\t%s\tkernel-check\trandom %s\t%s\t%s\t-\t5\t%s\t-\t-\tGB/s\td2d-copy\t%s\t%.3f\t%s\n",
	    date, commit, gpu, $3, $2, scen, $7, copy, $7 / copy, logname
}
/^bench i8 [A-Z0-9_]+ +[0-9]+x[0-9]+ +m=[0-9]+ +L=/ {	# K-quants on int8 activations
	m = $5; sub(/m=/, "", m); l = $6; sub(/L=/, "", l)
	printf "%s\t%s\t%s\tkernel-check\trandom %s\t%s\tmatvec-i8-L%s-m%s\t-\t5\t%s\t-\t-\tGB/s\td2d-copy\t%s\t%.3f\t%s\n",
	    date, commit, gpu, $4, $3, l, m, $9, copy, $9 / copy, logname
}' "$log"
