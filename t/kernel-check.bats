bats_require_minimum_version 1.5.0
setup() { load helper; }

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

@test "--help prints the usage of the man page's synopsis" {
	run -0 --separate-stderr kernel-check --help
	[ "${lines[0]}" = "usage: kernel-check [-bt] [-C bytes] [-d device] [-s seed] [-T type] [-U n] [model ...]" ]
	[ "${lines[1]}" = "       kernel-check -n model" ]
	[ "${#lines[@]}" = 2 ]
	syn=$(mandoc -Tascii "$TOP/man/kernel-check.1" | col -b | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
	    sed '1d;$d' | tr -s ' \t\n' ' ' | sed 's/^ *//; s/ *$//')
	[ "$syn" = "kernel-check [-bt] [-C bytes] [-d device] [-s seed] [-T type] [-U n] [model ...] kernel-check -n model" ]
}

@test "an unknown option is a usage error" {
	run -2 --separate-stderr kernel-check --bogus
	[ "${stderr_lines[0]}" = "kernel-check: unrecognized option '--bogus'" ]
}

@test "-n with two models is a usage error" {
	run -2 --separate-stderr kernel-check -n a.gguf b.gguf
	[ "${stderr_lines[0]}" = "kernel-check: -n: a model and no other option" ]
}

@test "a device number out of range is a usage error, not clamped" {
	run -2 --separate-stderr kernel-check -d -1
	[ "${stderr_lines[0]}" = "kernel-check: -d '-1': not a device number (0..1023)" ]
	run -2 --separate-stderr kernel-check -d 1024
}

@test "a chunk size out of range is a usage error" {
	run -2 --separate-stderr kernel-check -C 100
	[ "${stderr_lines[0]}" = "kernel-check: -C '100': not a chunk size (256..2560, a multiple of 16)" ]
	run -2 --separate-stderr kernel-check -C 1000
}

@test "an unroll factor out of range is a usage error" {
	run -2 --separate-stderr kernel-check -U 3
	[ "${stderr_lines[0]}" = "kernel-check: -U '3': not an unroll factor (1 or 2)" ]
}

@test "an unknown type name is a usage error" {
	run -2 --separate-stderr kernel-check -b -T Q9_Z
	[ "${stderr_lines[0]}" = "kernel-check: -T 'Q9_Z': not a type name" ]
}

@test "-n takes a model and no other option" {
	run -2 --separate-stderr kernel-check -n
	[ "${stderr_lines[0]}" = "kernel-check: -n: a model and no other option" ]
	run -2 --separate-stderr kernel-check -n -b "$DATA/tiny/llama-tiny"
	[ "${stderr_lines[0]}" = "kernel-check: -n: a model and no other option" ]
	run -2 --separate-stderr kernel-check --noise -s 2 "$DATA/tiny/llama-tiny"
}

@test "-n on a model that does not open fails with 1 and says why" {
	run -1 --separate-stderr kernel-check -n "$BATS_TEST_TMPDIR/none.gguf"
	[ "$output" = "" ]
	[[ ${stderr_lines[0]} == "kernel-check: "*"none.gguf"* ]]
}

# noise_figures OUTPUT: "rel order_rel steps_rel abs order_abs steps_abs tol near", from -n's three lines
noise_figures() {
	sed -n '1s/^cpu noise \([^ ]*\) (order \([^,]*\), steps \([^)]*\)) relative to 1 + |logit|$/\1 \2 \3/p
	    2s/^cpu noise \([^ ]*\) (order \([^,]*\), steps \([^)]*\)) absolute$/\1 \2 \3/p
	    3s/^tolerance \([^ ]*\) relative (model prefill logits), near-tie \([^ ]*\) (model greedy)$/\1 \2/p' <<<"$1" |
	    tr '\n' ' '
}

# The model checks' tolerance, computed on the CPU alone (any build): the larger of the attention
# orders' difference and the prefill's against the steps, three times it (at least 0.01, at least
# 0.1 with int8-activation products as SmolLM2's Q4_1, at most 1) for the logits, three times its
# absolute form (at least 0.001) for greedy near-ties.
@test "-n on SmolLM2: llama.cpp's attention order against the plain one is the noise, and sets the tolerance" {
	f=$(smollm2)
	run -0 --separate-stderr kernel-check -n "$f"
	[ "${#lines[@]}" = 3 ]
	read -r rel orel srel abs oabs sabs tol near <<<"$(noise_figures "$output")"
	[ -n "$near" ]
	run -0 awk -v r="$rel" -v o="$orel" -v s="$srel" -v a="$abs" -v oa="$oabs" -v sa="$sabs" \
	    -v t="$tol" -v n="$near" 'function max(x, y) { return x > y ? x : y }
	    function near(x, y) { return x - y <= 1e-2 * y && y - x <= 1e-2 * y }
	    BEGIN { exit !(o > 0.01 && oa > 0.1 && near(r, max(o, s)) && near(a, max(oa, sa)) &&
	    near(t, max(0.1, 3 * r < 1 ? 3 * r : 1)) && near(n, max(0.001, 3 * a))) }'
}

@test "-n on model A (qwen35): the attention orders agree bit for bit, the steps are the noise" {
	a=$(model_a)
	run -0 --separate-stderr kernel-check -n "$a"
	read -r rel orel srel abs oabs sabs tol near <<<"$(noise_figures "$output")"
	[ "$orel" = 0 ]
	[ "$oabs" = 0 ]
	[ "$rel" = "$srel" ]
	[ "$abs" = "$sabs" ]
	[ "$tol" = 0.01 ]
	run -0 awk -v s="$srel" 'BEGIN { exit !(s > 0 && s < 1e-3) }'
}

@test "without a GPU it fails with 1 and says why" {
	has_gpu && skip "a GPU is present"
	run -1 --separate-stderr kernel-check
	[ "$output" = "" ]
	[[ $stderr == "kernel-check: gpu: no CUDA device" || $stderr == "kernel-check: built without CUDA: no GPU kernels to check" ]]
}

# bats test_tags=gpu
@test "every kernel matches the CPU reference" {
	run -0 --separate-stderr kernel-check
	[[ ${lines[-1]} == "ALL GREEN ("*" checks)" ]]
	! grep -q ' FAIL$' <<<"$output" || false
}

# bats test_tags=gpu
@test "the self-test sees every broken check fail" {
	run -0 --separate-stderr kernel-check --self-test
	[[ ${lines[-1]} == "SELF-TEST OK: all "*" broken checks failed" ]]
}

# bats test_tags=gpu
@test "MEMRA_KC_BREAK=1 turns an ordinary run red" {
	MEMRA_KC_BREAK=1 run -1 --separate-stderr kernel-check
	[[ ${lines[-1]} == *" FAILED (of "*" checks)" ]]
	! grep -q ' OK$' <<<"$output" || false
}
