bats_require_minimum_version 1.5.0
# The CPU models of CUDA kernels in tools/*-emu.* (no GPU needed), each built
# as its header comment says, into the test's temporary directory, and run
# to its verdict line.  Seven compile the kernels' own text (attn-prefill,
# gdn-chunk, gdn-step: the .cuh files cuda/ includes; matvec-qkt-emu -k:
# cuda/matvec_qkt.cuh's device code through tools/matvec-qkt-kern.cc, with
# k_mvk's and k_iq4's from matvec_qk.cuh, matvec_iq4.cuh and gpu_iq4.cuh;
# matvec-q8-emu -k: k_mv8's rows, cuda/matvec_q8.cuh, through
# tools/matvec-q8-kern.cc; moe-gemm-kern: cuda/moe_gemm.cuh's, k_moe_gemm;
# moe-route-kern: cuda/moe_route.cuh's, k_moe_route),
# so a change there that breaks their indexing, masks or bit-for-bit
# properties fails here.  The others (matvec-*, mmq, norm-q8) replay the
# kernels by hand in C and compare with lib/quant: they fail when lib/quant
# moves, not when cuda/ does (keep them in step by hand).
setup() {
	load helper
	cd "$TOP" || return 1
	D=$BATS_TEST_TMPDIR
}

# need_cxx STD HEADER: skip unless g++ compiles HEADER at -std=STD
need_cxx() {
	command -v g++ >/dev/null 2>&1 || skip "g++ not installed"
	printf '#include <%s>\nint main() { return 0; }\n' "$2" |
	    g++ -std="$1" -pthread -x c++ -o "$D/cxx-probe" - >/dev/null 2>&1 ||
		skip "g++ cannot compile <$2> at -std=$1"
}

need_cc() { command -v cc >/dev/null 2>&1 || skip "cc not installed"; }

# emu_bg NAME PROG [ARG...]: PROG started in the background (the runs of a test
# share the cores), its output into $D/NAME.out and its status into $D/NAME.rc;
# emu_wait NAME [STATUS] waits for it, sets status, output and lines as `run`
# does, and unless it exited STATUS (default 0) shows what failed (the model's
# lines other than its passing ones, at most 30) and fails
emu_bg() {
	local n=$1
	shift
	{ "$@" >"$D/$n.out" 2>&1 && echo 0 >"$D/$n.rc" || echo $? >"$D/$n.rc"; } 3>&- &
	eval "emu_pid_$n=$!"
}

emu_wait() {
	local n=$1 want=${2:-0} pid
	eval "pid=\$emu_pid_$n"
	wait "$pid"
	run cat "$D/$n.out"
	status=$(cat "$D/$n.rc")
	[ "$status" -eq "$want" ] && return 0
	echo "$n exited $status, not $want:"
	printf '%s\n' "$output" | grep -v -E ' (OK|ok)$' | tail -n 30
	return 1
}

# emu_run PROG [ARG...]: run PROG to status 0 as emu_wait checks it
emu_run() {
	emu_bg fg "$@"
	emu_wait fg
}

# emu_cc NAME OPT: a C model over lib/quant, built as its header says
emu_cc() {
	cc "$2" -ffp-contract=off -std=c11 -D_GNU_SOURCE -Ilib -o "$D/$1" "tools/$1.c" \
	    lib/quant*.c lib/util.c -lm
}

@test "attn-prefill-emu: k_attn_prefill's phases against attention in double (causal, full, sliding windows), each row the bits of a call of its own" {
	need_cxx c++17 vector
	g++ -O2 -std=c++17 -ffp-contract=off -Icuda -o "$D/aemu" tools/attn-prefill-emu.cc
	emu_bg a0 "$D/aemu" 0/2
	emu_bg a1 "$D/aemu" 1/2
	for a in a0 a1; do	# the shapes in two halves, a core each
		emu_wait "$a"
		[[ $output != *FAIL* ]]
		[ "${lines[-1]}" = "ALL OK" ]
	done
}

@test "gdn-chunk-emu: k_gdn_prep and k_gdn_chunk against the recurrent form" {
	need_cxx c++17 vector
	g++ -O1 -std=c++17 -ffp-contract=off -Icuda -o "$D/gemu" tools/gdn-chunk-emu.cc
	emu_run "$D/gemu"
	[[ $output != *FAIL* ]]
	[ "${lines[-1]}" = "ALL OK" ]
}

@test "gdn-step-emu: k_gdn, k_gdn_pad, k_gdn_wide (and _seqs) from cuda/gdn_step.cuh's text" {
	need_cxx c++20 barrier
	g++ -O1 -std=c++20 -pthread -ffp-contract=off -Icuda -o "$D/gstep" tools/gdn-step-emu.cc
	emu_run "$D/gstep"
	[[ $output != *FAIL* ]]
	[ "${lines[-1]}" = "ALL GREEN" ]
}

@test "matvec-iq4-emu: the IQ4_XS / IQ4_NL decode lanes and GEMM sums against lib/quant" {
	need_cc
	emu_cc matvec-iq4-emu -O1
	emu_run "$D/matvec-iq4-emu"
	[ "${lines[-1]}" = "ALL OK" ]
}

@test "matvec-q8-emu: k_mv8's lanes (Q8_0, Q4_1, Q5_1, NVFP4, Q4_0, Q5_0) against quant_vec_dot" {
	need_cc
	emu_cc matvec-q8-emu -O1
	emu_run "$D/matvec-q8-emu"
	[[ $output != *FAIL* ]]
	[ "${lines[-1]}" = "OK (0 failures)" ]
}

# q8_pert N: the sed expression that breaks cuda/matvec_q8.cuh's text in place N (1: Q4_0's
# funnel shift, 2: Q5_0's fifth word, 3: Q8_0's halves read from the wrong word offset:
# misaligned loads of the right bytes, which UBSan catches where the bits cannot,
# 4: Q5_1's high qh bits)
q8_pert() {
	case $1 in
	1) echo 's/8u \* al;/8u * (al ^ 2u);/' ;;
	2) echo 's/P\[4\] = p\[aq == 0 \&\& h ? 3 : 4\];/P[4] = p[3];/' ;;
	3) echo 's/mv8_ld16(blk8 + 2 + 16 \* h, al ^ 2, w);/mv8_ld16(blk8 + 2 + 16 * h, al, w);/' ;;
	4) echo 's/(qh >> (4 \* i + 16) \& 0xF)/(qh >> (4 * i + 15) \& 0xF)/' ;;
	esac
}

# q8_kern DIR [-I...]: tools/matvec-q8-emu.c built with -DQ8_KERN and
# tools/matvec-q8-kern.cc (its includes searched first in the options given) into
# DIR/emu, under ASan and UBSan where the compiler has them ($san)
q8_kern() {
	local d=$1
	shift
	mkdir -p "$d"
	g++ -O1 $san -std=c++17 -ffp-contract=off -fno-strict-aliasing -Wno-unknown-pragmas \
	    "$@" -Icuda -Ilib -c -o "$d/kern.o" tools/matvec-q8-kern.cc &&
	    cc -O1 $san -ffp-contract=off -std=c11 -D_GNU_SOURCE -DQ8_KERN -Ilib -o "$d/emu" \
	    tools/matvec-q8-emu.c "$d/kern.o" lib/quant*.c lib/util.c -lm -lstdc++
}

# q8_try DIR [-I...]: q8_kern, then DIR/emu run
q8_try() {
	q8_kern "$@" && "$1/emu"
}

@test "matvec-q8-emu -k: cuda/matvec_q8.cuh's own device code (k_mv8's rows: Q8_0 by one lane a block or two, Q4_0, Q5_0, Q4_1, Q5_1), lane by lane under ASan and UBSan, gives the model's bits at every M of k_mv8 and the grouped kernels, reading nothing past the aligned word of the rows' last byte; each broken text fails" {
	need_cc
	need_cxx c++17 vector
	san=
	printf 'int main(void) { return 0; }\n' | cc -fsanitize=address,undefined -x c \
	    -o "$D/san-probe" - >/dev/null 2>&1 &&
		san='-fsanitize=address,undefined -fno-sanitize-recover=all'
	[ -n "$san" ] || [ "${MEMRA_REQUIRE_PEERS:-0}" != 1 ] ||
		{ echo "cc has no ASan/UBSan (MEMRA_REQUIRE_PEERS=1)"; false; }
	for p in 1 2 3 4; do	# (built and run in the background: a failed build fails below)
		mkdir -p "$D/p$p/inc"
		sed "$(q8_pert "$p")" cuda/matvec_q8.cuh >"$D/p$p/inc/matvec_q8.cuh"
		! cmp -s cuda/matvec_q8.cuh "$D/p$p/inc/matvec_q8.cuh" || false	# (it took)
		emu_bg "p$p" q8_try "$D/p$p" "-I$D/p$p/inc"
	done
	emu_run q8_try "$D/k"
	[[ $output != *FAIL* ]]
	[[ $output =~ $'\n'"k_mv8's text (cuda/matvec_q8.cuh) against the model: "[1-9][0-9]*" products"$'\n' ]]
	[ "${lines[-1]}" = "OK (0 failures)" ]
	for p in 1 2 4; do
		emu_wait "p$p" 1
		[[ $output == *$'\nFAIL '*"k_mv8's text at M="*" differs"* ]]
	done
	[ -z "$san" ] && skip "no sanitizers: the misaligned text (3) is not caught"
	emu_wait p3 1
	[[ $output == *"runtime error: load of misaligned address"* ]]
}

@test "matvec-q8tc-emu: k_mv8t and the experts' k_moe_mv8t give k_mv8's bits (Q8_0, NVFP4, Q4_0, Q5_0), and each perturbed model fails" {
	need_cc
	emu_cc matvec-q8tc-emu -O2
	emu_bg q "$D/matvec-q8tc-emu"
	for p in 1 2 3 4 5 6 7; do
		emu_bg "p$p" "$D/matvec-q8tc-emu" -p "$p"
	done
	emu_wait q
	[[ ${lines[-1]} =~ ^[1-9][0-9]*\ checks,\ 0\ failed$ ]]
	[ "$(grep -c '^moe .* tc=[019]: [0-9]* outputs, .*: same bits$' <<<"$output")" -eq 48 ]
	for t in Q8_0 NVFP4 Q4_0 Q5_0; do	# each type's dense and grouped lines
		grep -q "^$t 300x4096: m = 1..32, offsets [0-9 ]*: same bits$" <<<"$output"
		grep -q "^moe $t .* tc=9: .*: same bits$" <<<"$output"
	done
	for p in 1 2 3 4 5 6 7; do
		emu_wait "p$p" 1
		[[ ${lines[-1]} =~ ^[0-9]+\ checks,\ [1-9][0-9]*\ failed\ \(perturbed\ model\)$ ]]
		[ "$p" -lt 4 ] || [[ $output == *$'\nmoe '*' DIFFER'* ]]	# the grouped checks' own
		[ "$p" -ne 7 ] || [[ $output == *$'\nQ5_0 '*' DIFFER'* ]]	# Q4_0's, Q5_0's decode
	done
}

@test "matvec-qk-emu: k_mvk at 4 and 8 lanes a super-block against lib/quant" {
	need_cc
	emu_cc matvec-qk-emu -O1
	for lanes in 4 8; do
		emu_bg "l$lanes" "$D/matvec-qk-emu" "$lanes"
	done
	for lanes in 4 8; do
		emu_wait "l$lanes"
		[[ $output != *FAIL* ]]
		[[ ${lines[-1]} =~ ^ALL\ OK\ \([1-9][0-9]*\ quantizations\ compared\)$ ]]
	done
}

@test "matvec-qkt-emu: k_mvkt gives k_mvk's bits at 4 and 8 lanes (IQ4_XS k_iq4's at 8), and each perturbed model fails" {
	need_cc
	emu_cc matvec-qkt-emu -O2
	for lanes in 4 8; do
		emu_bg "l$lanes" "$D/matvec-qkt-emu" "$lanes"
	done
	for p in 1 2 3 4; do
		emu_bg "p4_$p" "$D/matvec-qkt-emu" 4 -p "$p"
	done
	for p in 1 2 3 5 6; do
		emu_bg "p8_$p" "$D/matvec-qkt-emu" 8 -p "$p"
	done
	for lanes in 4 8; do
		emu_wait "l$lanes"
		[[ $output != *FAIL* ]]
		[[ ${lines[-1]} =~ ^[1-9][0-9]*\ checks,\ 0\ failed$ ]]
	done
	# IQ4_XS (8 lanes, its one form): 5 row lengths and 4 expert stacks (one in pairs of tiles)
	[ "$(grep -c '^IQ4_XS L=8 .*: same bits' <<<"$output")" -eq 9 ]
	for p in 1 2 3 4; do
		emu_wait "p4_$p" 1
		[[ ${lines[-1]} =~ ^[0-9]+\ checks,\ [1-9][0-9]*\ failed\ \(perturbed\ model\)$ ]]
	done
	for p in 1 2 3 5 6; do
		emu_wait "p8_$p" 1
		[[ ${lines[-1]} =~ ^[0-9]+\ checks,\ [1-9][0-9]*\ failed\ \(perturbed\ model\)$ ]]
		[ "$p" -eq 5 ] || [[ $output == *$'\nIQ4_XS L=8 moe: '*' DIFFER'* ]]	# IQ4_XS's own checks
	done
}

@test "matvec-qkt-emu -k: cuda/matvec_qkt.cuh's own device code, thread by thread, gives the bits of k_mvk's (cuda/matvec_qk.cuh), four blocks in flight or two, Q6_K's rows staged, packed four blocks a group or in place (k_mvk's and k_mvkt's text), and of k_iq4's for IQ4_XS (cuda/matvec_iq4.cuh)" {
	need_cc
	need_cxx c++17 vector
	g++ -O2 -std=c++17 -ffp-contract=off -fno-strict-aliasing -Wno-unknown-pragmas \
	    -Icuda -Ilib -c -o "$D/kern.o" tools/matvec-qkt-kern.cc
	cc -O2 -ffp-contract=off -std=c11 -D_GNU_SOURCE -DQKT_KERN -Ilib -o "$D/qkt-kern" \
	    tools/matvec-qkt-emu.c "$D/kern.o" lib/quant*.c lib/util.c -lm -lstdc++
	for lanes in 4 8; do
		emu_bg "k$lanes" "$D/qkt-kern" "$lanes" -k
	done
	for lanes in 4 8; do
		emu_wait "k$lanes"
		[[ $output != *FAIL* ]]
		[ "${lines[-3]}" = "k_mvk's text, four blocks in flight against two: 0 outputs differ" ]
		[ "${lines[-2]}" = "mvk_ref against k_mvk's text: 0 outputs differ" ]
		[[ ${lines[-1]} =~ ^[1-9][0-9]*\ checks,\ 0\ failed\ \(the\ kernels\'\ text\)$ ]]
	done
	# (mvk_row_s, mvk_row_x4, k_mvkt packed: Q6_K at 8 lanes; the staged copies landing at
	# their waits and at their issue)
	[ "${lines[-4]}" = "mvk_row_s's text, Q6_K rows staged against in place: 0 outputs differ" ]
	[ "${lines[-5]}" = "k_mvkt's text, Q6_K weights packed against k_mvk's in place: 0 outputs differ" ]
	[ "${lines[-6]}" = "mvk_row_x4's text, Q6_K weights packed against in place: 0 outputs differ" ]
	grep -qx "Q6_K L=8: mvk_row_s's text (rows staged), rows of 5 to 48 super-blocks, m = 1, 3, 16: same bits" <<<"$output"
	grep -qx "Q6_K L=8: mvk_row_x4's text (weights packed four blocks a group), the same rows: same bits" <<<"$output"
	grep -qx "Q6_K L=8: k_mvkt's text on weights packed four blocks a group, 19 rows of 5 to 21 super-blocks, m = 1..32: same bits" <<<"$output"
	[ "$(grep -c '^IQ4_XS L=8 .*: same bits' <<<"$output")" -eq 9 ]
}

@test "moe-gemm-kern: cuda/moe_gemm.cuh's own device code (k_moe_gemm), thread by thread, gives each slot's product of its bf16 operands, the same bits whatever the other slots, and each perturbed model fails" {
	need_cc
	need_cxx c++17 vector
	for f in lib/quant*.c lib/util.c; do
		cc -O2 -std=c11 -D_GNU_SOURCE -Ilib -c -o "$D/$(basename "$f" .c).o" "$f"
	done
	g++ -O2 -std=c++17 -ffp-contract=off -Wno-unknown-pragmas -Icuda -Ilib \
	    -c -o "$D/mg.o" tools/moe-gemm-kern.cc
	g++ -o "$D/moe-gemm-kern" "$D/mg.o" "$D"/quant*.o "$D/util.o" -lm
	for p in 1 2 3 4; do
		emu_bg "p$p" "$D/moe-gemm-kern" -p "$p"
	done
	emu_run "$D/moe-gemm-kern"
	[[ $output != *FAIL* ]]
	[ "$(grep -c ': OK$' <<<"$output")" -eq 9 ]
	[[ ${lines[-1]} =~ ^[1-9][0-9]*\ checks,\ 0\ failed$ ]]
	for p in 1 2 3 4; do
		emu_wait "p$p" 1
		[[ ${lines[-1]} =~ ^[0-9]+\ checks,\ [1-9][0-9]*\ failed\ \(perturbed\ model\)$ ]]
	done
}

@test "moe-route-kern: cuda/moe_route.cuh's own device code (k_moe_route), a warp's lanes with their shuffles, picks and weighs as the router's documented order for softmax and sigmoid routers, top 1 to 40 of 8 to 256 experts; broken texts and perturbed references fail" {
	need_cxx c++17 vector
	g++ -O1 -std=c++17 -ffp-contract=off -Wno-unknown-pragmas -Icuda -o "$D/rk" \
	    tools/moe-route-kern.cc
	# the text broken: a lane keeping its neighbour's pick; picks past 32 from the 34th
	mkdir -p "$D/b1" "$D/b2"
	sed 's/if (lane == j)$/if (lane == (j ^ 1))/' cuda/moe_route.cuh >"$D/b1/moe_route.cuh"
	sed 's/for (int j = 32; j < k; j++) {/for (int j = 33; j < k; j++) {/' cuda/moe_route.cuh \
	    >"$D/b2/moe_route.cuh"
	for b in 1 2; do
		! cmp -s cuda/moe_route.cuh "$D/b$b/moe_route.cuh" || false	# (it took)
		g++ -O1 -std=c++17 -ffp-contract=off -Wno-unknown-pragmas -I"$D/b$b" -Icuda \
		    -o "$D/rk$b" tools/moe-route-kern.cc
		emu_bg "b$b" "$D/rk$b"
	done
	for p in 1 2 3; do
		emu_bg "p$p" "$D/rk" -p "$p"
	done
	emu_run "$D/rk"
	[[ $output != *DIFFER* ]]
	[ "$(grep -c ': OK$' <<<"$output")" -eq 150 ]
	[[ ${lines[-1]} =~ ^[1-9][0-9]*\ checks,\ 0\ failed$ ]]
	for b in 1 2; do
		emu_wait "b$b" 1
		[[ ${lines[-1]} =~ ^[0-9]+\ checks,\ [1-9][0-9]*\ failed$ ]]
	done
	for p in 1 2 3; do
		emu_wait "p$p" 1
		[[ ${lines[-1]} =~ ^[0-9]+\ checks,\ [1-9][0-9]*\ failed\ \(perturbed\ model\)$ ]]
	done
}

@test "mmq-emu: k_mmq2's mma and dp4a paths against the CPU's numerics" {
	need_cc
	emu_cc mmq-emu -O1
	emu_run "$D/mmq-emu"
	[[ $output != *FAIL* ]]
	[ "${lines[-1]}" = "ALL OK" ]
}

@test "norm-q8-emu: the norm + quantize kernels' sums and Q8 bytes against the CPU's" {
	need_cc
	emu_cc norm-q8-emu -O2
	emu_run "$D/norm-q8-emu" 20000
	[ "${#lines[@]}" -eq 4 ]
	for l in "${lines[@]}"; do
		[[ $l == "d="*" rows 20000: "*"; y != cpu 0; q8_0/q8_1 rows != quant_quantize_act 0" ]]
	done
}
