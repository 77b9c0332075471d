# bench/: every receipt path the docs name exists, no receipt is orphaned, and
# README's speed table is what tools/speed-table makes of the receipts.
bats_require_minimum_version 1.5.0
setup() { load helper; }

# tree: a small copy of the layout, with tools/bench-check, in $T
tree() {
	T=$BATS_TEST_TMPDIR/tree
	mkdir -p "$T/tools" "$T/man" "$T/bench/2030-01-01"
	cp "$TOP/tools/bench-check" "$T/tools/"
	printf 'Receipts: bench/2030-01-01/2030-01-01-a-notes.md.\n' >"$T/README.md"
	printf '.Pa bench/2030-01-01/2030-01-01-a.tsv\n' >"$T/man/x.1"
	printf '# a\nRows in 2030-01-01-a.tsv, runs in 2030-01-01-a-run*.log.\n' >"$T/bench/2030-01-01/2030-01-01-a-notes.md"
	printf 'date\tlog\n2030-01-01\t2030-01-01-a.log\n' >"$T/bench/2030-01-01/2030-01-01-a.tsv"
	: >"$T/bench/2030-01-01/2030-01-01-a.log"
	: >"$T/bench/2030-01-01/2030-01-01-a-run1.log"
	printf -- '- [notes](2030-01-01/2030-01-01-a-notes.md), `2030-01-01/2030-01-01-a.tsv`\n' >"$T/bench/README.md"
}

@test "every bench/ path named in README, man pages, notes and TSVs exists; every receipt is indexed" {
	run -0 bench-check
	[ -z "$output" ]
}

@test "README's speed table is tools/speed-table's output" {
	run -0 speed-table
	table=$output
	run -0 sed -n '/<!-- speed:begin -->/,/<!-- speed:end -->/{//!p}' "$TOP/README.md"
	[ "$output" = "$table" ]
}

@test "bench-check passes a tree whose paths resolve" {
	tree
	run -0 "$T/tools/bench-check"
	[ -z "$output" ]
}

@test "bench-check names a missing path in README and in a man page" {
	tree
	printf 'See bench/2030-01-01/2030-01-01-gone.log.\n' >>"$T/README.md"
	printf '.Pa bench/2030-01-02/x.tsv\n' >>"$T/man/x.1"
	run -1 "$T/tools/bench-check"
	[[ $output == *"README.md:2: 'bench/2030-01-01/2030-01-01-gone.log' names no file"* ]]
	[[ $output == *"man/x.1:2: 'bench/2030-01-02/x.tsv' names no file"* ]]
}

@test "bench-check names a notes file's missing log and a glob that matches nothing" {
	tree
	printf 'Also 2030-01-01-b.log and 2030-01-01-c-*.log.\n' >>"$T/bench/2030-01-01/2030-01-01-a-notes.md"
	run -1 "$T/tools/bench-check"
	[[ $output == *"2030-01-01-a-notes.md:3: '2030-01-01-b.log' names no file"* ]]
	[[ $output == *"2030-01-01-a-notes.md:3: '2030-01-01-c-*.log' names no file"* ]]
}

@test "bench-check names a TSV row whose log is not beside it" {
	tree
	printf '2030-01-01\t2030-01-01-z.log\n' >>"$T/bench/2030-01-01/2030-01-01-a.tsv"
	run -1 "$T/tools/bench-check"
	[[ $output == *"2030-01-01-a.tsv:3: '2030-01-01-z.log' names no file"* ]]
}

@test "bench-check names a receipt nothing reaches, until the index names it" {
	tree
	: >"$T/bench/2030-01-01/2030-01-01-orphan.log"
	run -1 "$T/tools/bench-check"
	[ "$output" = "bench/2030-01-01/2030-01-01-orphan.log: not reached from bench/README.md" ]
	printf -- '- logs `2030-01-01/2030-01-01-o*`\n' >>"$T/bench/README.md"
	run -0 "$T/tools/bench-check"
}
