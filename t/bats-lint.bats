# tools/bats-lint: the test files hold no assertion that bash's errexit skips
# (a negated command, the first test of an && list), and the lint names them.
bats_require_minimum_version 1.5.0
setup() {
	load helper
	P=$BATS_TEST_TMPDIR
	LINT="sh $TOP/tools/bats-lint"
}

@test "every bats file's assertions stop their test when they fail" {
	run -0 $LINT "$TOP"/t/*.bats
	[ -z "$output" ]
}

@test "why: bats passes a test whose negated command or first && test fails; || false fails it" {
	printf '%s\n' '@test "neg" { ! true; true; }' '@test "and" { [ 1 = 2 ] && [ 1 = 1 ]; true; }' \
	    '@test "neg, or false" { ! true || false; true; }' '@test "one a line" { [ 1 = 2 ]; [ 1 = 1 ]; }' \
	    >"$P/why.bats"
	run -1 bats --formatter tap "$P/why.bats"
	[ "${lines[1]}" = "ok 1 neg" ]
	[ "${lines[2]}" = "ok 2 and" ]
	[[ $output == *"not ok 3 neg, or false"* ]]
	[[ $output == *"not ok 4 one a line"* ]]
}

@test "bats-lint names each such line, and passes control flow and || false" {
	# (each line quoted: bats would take a test line at the start of a line as its own)
	printf '%s\n' '@test "x" {' \
	    '	! grep -q a "$f"' \
	    '	! cmp -s a b	# it'"'"'s a comment' \
	    '	[ "$a" = 1 ] && [ "$b" = 2 ]' \
	    '	[[ $a == x ]] && [[ $b == y ]]	# and a comment' \
	    '	! grep -q a "$f" || false' \
	    '	[ -n "$a" ] && [ -f "$b" ] || skip "none"' \
	    '	[ "$a" = 1 ] && break' \
	    '	[ "$a" = 1 ] || [ "$b" = 2 ]' \
	    '	if ! grep -q a "$f"; then :; fi' \
	    '	[[ $a == x && $b == y ]]' '}' >"$P/x.bats"
	run -1 $LINT "$P/x.bats"
	[ "${#lines[@]}" = 4 ]
	[[ ${lines[0]} == "$P/x.bats:2: \`! cmd\` does not fail a test"* ]]
	[[ ${lines[1]} == "$P/x.bats:3: "* ]]
	[[ ${lines[2]} == "$P/x.bats:4: \`[ a ] && [ b ]\` goes on when \`[ a ]\` fails"* ]]
	[[ ${lines[3]} == "$P/x.bats:5: "* ]]
	run -2 $LINT
	[ "$output" = "usage: bats-lint FILE..." ]
}
