bats_require_minimum_version 1.5.0
setup() { load helper; }

has_gpu() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }

@test "--help prints the usage of the man page's synopsis" {
	run -0 --separate-stderr kernel-check --help
	[ "$output" = "usage: kernel-check [-bt] [-C bytes] [-d device] [-s seed] [-T type] [-U n] [model]" ]
	syn=$(mandoc -Tascii "$TOP/man/kernel-check.1" | col -b | sed -n '/^SYNOPSIS/,/^DESCRIPTION/p' |
	    sed '1d;$d' | tr -s ' \t\n' ' ' | sed 's/^ *//; s/ *$//')
	[ "$syn" = "kernel-check [-bt] [-C bytes] [-d device] [-s seed] [-T type] [-U n] [model]" ]
}

@test "an unknown option is a usage error" {
	run -2 --separate-stderr kernel-check --bogus
	[ "${stderr_lines[0]}" = "kernel-check: unrecognized option '--bogus'" ]
}

@test "two operands are a usage error" {
	run -2 --separate-stderr kernel-check a.gguf b.gguf
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
	! grep -q ' FAIL$' <<<"$output"
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
	! grep -q ' OK$' <<<"$output"
}
