bats_require_minimum_version 1.5.0
# MEMRA_PP_STAGES on the CPU: the split (stand-in pipe link) prints its proof
# lines and changes no token of run-gen or run-spec on model A and SmolLM2
setup() { load helper; }

# run-gen's tokens and text (stdout) with the split are the whole model's
gen_same() {
	run -0 --separate-stderr run-gen --raw --ids -n 24 -t 2 "$@" "def fibonacci(n):"
	want=$output
	run -0 --separate-stderr env MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu \
	    run-gen --raw --ids -n 24 -t 2 "$@" "def fibonacci(n):"
	[ "$output" = "$want" ]
	[[ $stderr == *"[pp] cross-device transport: stage0=cpu stage1=cpu"* ]]
	[[ $stderr == *"prefill argmax="*" MATCH"* ]]
}

@test "run-gen split in two on model A gives the whole model's tokens" {
	gen_same "$(model_a)"
}

@test "every cut point of model A gives the same tokens" {
	d=$(model_a)
	run -0 --separate-stderr run-gen --raw --ids -n 16 -t 2 "$d" "The sky is"
	want=$output
	for c in 1 2 3 4 5 6 7; do
		run -0 --separate-stderr run-gen --pp-stages 2 --pp-splits $c --raw --ids -n 16 -t 2 \
		    "$d" "The sky is"
		[ "$output" = "$want" ]
		[[ $stderr == *"[pp] stage1: cpu "*" layers $c-7 + head + mtp,"* ]]
	done
}

@test "run-gen split in two on SmolLM2 (llama) gives the whole model's tokens" {
	export PATH=/work/main/build/venv/bin:$PATH
	gen_same "$(smollm2)"
}

@test "run-spec split in three passes identical to plain" {
	d=$(model_a)
	run -0 --separate-stderr run-spec --raw -K 1-3 -n 24 -t 2 "$d" "def fibonacci(n):"
	want=$(sed 's/ [0-9.]* tok\/s\( [0-9.]*x\)\{0,1\}//' <<<"$output")
	run -0 --separate-stderr run-spec --pp-stages 3 --pp-devices cpu,cpu,cpu --raw -K 1-3 \
	    -n 24 -t 2 "$d" "def fibonacci(n):"
	[ "${lines[4]}" = "SELF-CONSISTENCY PASS" ]
	[ "$(sed 's/ [0-9.]* tok\/s\( [0-9.]*x\)\{0,1\}//' <<<"$output")" = "$want" ]
	[[ $stderr == *"[pp] cross-device transport: stage0=cpu stage1=cpu stage2=cpu"* ]]
	[[ $stderr == *"[pp] link: pipe"* ]]
}

@test "a device list that does not match the stages is a usage error" {
	d=$(model_a)
	MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=0 run -2 --separate-stderr run-gen "$d" hi
	[ "$stderr" = "run-gen: MEMRA_PP_DEVICES: pipeline: devices '0': 1 for 2 stages" ]
	MEMRA_PP_STAGES=2 MEMRA_PP_DEVICES=cpu,cpu,cpu run -2 run-spec "$d" hi
	MEMRA_PP_STAGES=17 run -2 run-gen "$d" hi
	MEMRA_PP_DEVICES=0,1 run -2 run-gen "$d" hi	# devices without stages
	run -2 run-gen --pp-stages 2 --pp-splits 3,4 "$d" hi
}

@test "a split past the last layer fails and names the stage" {
	d=$(model_a)
	run -1 --separate-stderr run-gen --pp-stages 2 --pp-splits 9 "$d" hi
	[ "$stderr" = "run-gen: stage 0 (cpu): $d: pipeline: a stage of layers 0..8: the model has layers 0..7" ]
}
