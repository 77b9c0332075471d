bats_require_minimum_version 1.5.0
# Images through serve (issue 32): MEMRA_GEMMA_VISION + MEMRA_GEMMA_MMPROJ, OpenAI image_url
# parts as data: URIs, the tower's soft tokens in the prompt, exactly run-gen --image's
# greedy tokens, alone and beside other sessions, with Gemma-4's assistant drafting, and
# reuse keyed by the images' bytes: a multi-turn image chat resumes past its images with
# a cold prefill's bits, and another image of the same size never matches.
# The model is t/data/gemma4/g4-vision (tools/make-gemma4-vision.py); its image budget is
# 70 soft tokens (a.png: 63, b.jpg: 60).
setup() {
	load helper
	load serve
	P=$BATS_TEST_TMPDIR
	V=$DATA/gemma4/g4-vision
	SV="python3 $TOP/t/serve-vision.py"
	SPID=
}

teardown() { serve_teardown; }

# png FILE W H SEED: a W x H RGB PNG of pseudo-random pixels (stored, not compressed)
png() {
	python3 -c 'import random,struct,sys,zlib
f,w,h,seed=sys.argv[1],int(sys.argv[2]),int(sys.argv[3]),int(sys.argv[4])
r=random.Random(seed)
raw=b"".join(b"\0"+bytes(r.getrandbits(8) for _ in range(3*w)) for _ in range(h))
def chunk(t,d): return struct.pack(">I",len(d))+t+d+struct.pack(">I",zlib.crc32(t+d))
open(f,"wb").write(b"\x89PNG\r\n\x1a\n"+chunk(b"IHDR",struct.pack(">IIBBBBB",w,h,8,2,0,0,0))+
    chunk(b"IDAT",zlib.compress(raw,0))+chunk(b"IEND",b""))' "$@"
}

# want N TEXT IMAGE...: run-gen's greedy reply to a chat of the images then TEXT, as
# {"content", "prompt_tokens", "bytes"} (each token's bytes, as serve's logprobs give them)
want() {
	local n=$1 text=$2 ids err=$P/want.err f img=()
	shift 2
	for f in "$@"; do img+=(--image "$f"); done
	# WANT_DEVICE: run-gen's device (the CPU's by default)
	img+=(--device "${WANT_DEVICE:-cpu}")
	ids=$(run-gen -t 2 -n "$n" --ids "${img[@]}" "$V" "$text" 2>"$err")
	grep -q MATCH "$err"
	python3 -c 'import json,sys
print(json.dumps({"content": sys.argv[1], "prompt_tokens": int(sys.argv[2]), "bytes": json.loads(sys.argv[3])}))' \
	    "$(run-gen -t 2 -n "$n" "${img[@]}" "$V" "$text" 2>/dev/null)" \
	    "$(sed -n 's/^prompt tokens=\([0-9]*\) .*/\1/p' "$err")" \
	    "$($SV - tokbytes "$V/tokenizer.json" $ids)"
}

# same WANT GOT: serve's reply GOT (serve-vision.py's line) has WANT's prompt tokens, each
# token's bytes where it has them (--logprobs), and WANT's content (but for the U+FFFD of a
# last incomplete UTF-8 sequence: run-gen writes one for each of its bytes, serve fewer)
same() {
	python3 -c 'import json,sys
w,g=json.loads(sys.argv[1]),json.loads(sys.argv[2])
ok=g["content"].rstrip("\ufffd")==w["content"].rstrip("\ufffd") and \
    g["prompt_tokens"]==w["prompt_tokens"] and ("bytes" not in g or g["bytes"]==w["bytes"])
sys.exit(0 if ok else "want %s\ngot  %s" % (sys.argv[1], sys.argv[2]))' "$1" "$2"
}

@test "the cookbook's vision seam boots (memra-server name), with the tower's proof lines" {
	need_py openai
	# an mmproj GGUF carries no image processor: its budget is 280 unless MEMRA_IMAGE_TOKENS
	start_serve memra-server MEMRA_COMPAT=openai MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 \
	    MEMRA_GEMMA_MMPROJ="$V/mmproj-f32.gguf" MEMRA_IMAGE_TOKENS=70
	grep -qxF "[vision] gemma4 tower: 2 layers, hidden 32, patch 4, pool 3, 70 soft tokens an image at most, image rows bidirectional ($V/mmproj-f32.gguf)" "$LOG"
	grep -q '^\[vision\] images in chat messages as data: URIs: 8 a request at most, 16 MiB each, 32 MiB in all; the tower on the CPU' "$LOG"
	run -0 $SV "$URL" chat g 6 "@$V/images/a.png" "What is this?"
	same "$(want 6 "What is this?" "$V/images/a.png")" "$output"
}

@test "boot: MEMRA_VISION_DIR refused by name; the vision settings checked" {
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_VISION_DIR=d serve
	[ "$stderr" = "serve: MEMRA_VISION_DIR: not supported by this server (refusing to run a different configuration)" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" MEMRA_GEMMA_OTHER=r serve
	[ "$stderr" = "serve: MEMRA_GEMMA_OTHER: not supported by this server (refusing to run a different configuration)" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" MEMRA_GEMMA_MMPROJ="$V/mmproj-f32.gguf" serve
	[ "$stderr" = "serve: MEMRA_GEMMA_MMPROJ (--mmproj): goes with MEMRA_GEMMA_VISION=1" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" serve --max-images 3
	[ "$stderr" = "serve: MEMRA_MAX_IMAGES (--max-images): goes with MEMRA_GEMMA_VISION=1" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION_DEVICE=cpu serve
	[ "$stderr" = "serve: MEMRA_GEMMA_VISION_DEVICE (--gemma-vision-device): goes with MEMRA_GEMMA_VISION=1" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" serve --gemma-vision 1 --gemma-vision-device gpu
	[ "$stderr" = "serve: MEMRA_GEMMA_VISION_DEVICE (--gemma-vision-device): 'gpu': not cpu or cuda[:N]" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=yes serve
	[ "$stderr" = "serve: MEMRA_GEMMA_VISION (--gemma-vision): 'yes': out of range 0..1 or not a number" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" serve --gemma-vision 1 --image-tokens 100
	[ "$stderr" = "serve: MEMRA_IMAGE_TOKENS (--image-tokens): '100': not 70, 140, 280, 560 or 1120" ]
	run -2 --separate-stderr env MEMRA_MODELS="g=$V" serve --gemma-vision 1 --max-images 0
	[[ $stderr == "serve: MEMRA_MAX_IMAGES (--max-images): '0': out of range 1..256"* ]]
	run -1 --separate-stderr env MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 \
	    MEMRA_GEMMA_MMPROJ=/nonexistent.gguf serve --device cpu -t 2
	[[ ${stderr##*$'\n'} == "serve: MEMRA_GEMMA_VISION: /nonexistent.gguf"* ]]
	# the tower opens before the first model's sessions are sized: a bad one stops the boot there
	[ "$(grep -c '^\[sched\] g: ' <<<"$stderr")" = 0 ]
	# two models and no MEMRA_GEMMA_MMPROJ: which checkpoint's tower? (refused before loading)
	run -2 --separate-stderr env MEMRA_MODELS="g=$V,,h=$V" MEMRA_GEMMA_VISION=1 serve --device cpu
	[ "${stderr##*$'\n'}" = "serve: MEMRA_GEMMA_VISION with 2 models: MEMRA_GEMMA_MMPROJ names the tower" ]
	[ "$(grep -c '^\[model\]' <<<"$stderr")" = 0 ]
	# a text model with no tower of its own, and a tower for another width
	run -1 --separate-stderr env MEMRA_MODELS="d=$DATA/gemma4/g4-dense" MEMRA_GEMMA_VISION=1 \
	    serve --device cpu -t 2
	[ "${stderr##*$'\n'}" = "serve: MEMRA_GEMMA_VISION: $DATA/gemma4/g4-dense: config.json has no vision_config" ]
	run -1 --separate-stderr env MEMRA_MODELS="s=$DATA/tiny/llama-tiny" MEMRA_GEMMA_VISION=1 \
	    MEMRA_GEMMA_MMPROJ="$V/mmproj-f32.gguf" serve --device cpu -t 2
	[[ ${stderr##*$'\n'} == "serve: MEMRA_GEMMA_VISION: $V/mmproj-f32.gguf: a tower for a text width of 32, model 's' has "* ]]
}

@test "a base64 PNG, a JPEG, both in one message: run-gen --image's greedy tokens; usage counts image tokens" {
	need_py openai
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1
	run -0 $SV "$URL" chat g 16 --logprobs "@$V/images/a.png" "What is this?"
	same "$(want 16 "What is this?" "$V/images/a.png")" "$output"
	png=$output
	run -0 $SV "$URL" chat g 16 "@$V/images/a.png" "What is this?"	# picks on the backend
	same "$(want 16 "What is this?" "$V/images/a.png")" "$output"
	plain=$output
	run -0 $SV "$URL" chat g 16 --stream "@$V/images/a.png" "What is this?"
	same "$(want 16 "What is this?" "$V/images/a.png")" "$output"
	# n choices share the prompt's prefill (choice 0's, images and all)
	run -0 $SV "$URL" chat g 16 --n 3 "@$V/images/a.png" "What is this?"
	[ "$(jq -c .contents <<<"$output")" = "$(jq -c '[.content, .content, .content]' <<<"$plain")" ]
	[ "$(jq .prompt_tokens <<<"$output")" = "$(jq .prompt_tokens <<<"$plain")" ]
	run -0 $SV "$URL" chat g 16 --logprobs "@$V/images/b.jpg" "And this?"
	same "$(want 16 "And this?" "$V/images/b.jpg")" "$output"
	run -0 $SV "$URL" chat g 16 --logprobs "@$V/images/a.png" "@$V/images/b.jpg" "Compare them."
	same "$(want 16 "Compare them." "$V/images/a.png" "$V/images/b.jpg")" "$output"
	# the image's tokens are the prompt's: <|image>, its 63 soft tokens and <image|> for the marker
	run -0 $SV "$URL" chat g 1 "What is this?"
	[ "$(jq .prompt_tokens <<<"$png")" -gt "$(($(jq .prompt_tokens <<<"$output") + 64))" ]
	[ "$(jq .completion_tokens <<<"$png")" = 16 ]
}

@test "image requests beside other sessions (prefill chunks interleaved) give their tokens alone" {
	need_py openai
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_MAX_SESSIONS=4 \
	    MEMRA_PREFILL_CHUNK=32 MEMRA_STEP_PREFILL=32
	long="Describe the picture in great detail, every colour and every shape of it, please."
	w=("$(want 64 "$long" "$V/images/a.png")" "$(want 64 "And this?" "$V/images/b.jpg")"
	    "$(want 64 "What is the capital of France?")"
	    "$(want 64 "$long" "$V/images/b.jpg" "$V/images/a.png")")
	# every round gives each its solo tokens; one round at least ran them together (fewer
	# steps than the tokens they generated): on a loaded machine a round's image requests
	# may arrive after the text one has finished, so up to three rounds
	together=0 before=0
	for round in 1 2 3; do
		run -0 $SV "$URL" many g 64 "@$V/images/a.png|$long" "@$V/images/b.jpg|And this?" \
		    "What is the capital of France?" "@$V/images/b.jpg|@$V/images/a.png|$long"
		[ "${#lines[@]}" = 4 ]
		for i in 0 1 2 3; do same "${w[$i]}" "${lines[$i]}"; done
		tokens=0
		for l in "${lines[@]}"; do tokens=$((tokens + $(jq .completion_tokens <<<"$l"))); done
		steps=$(curl -s "$URL/metrics" | sed -n 's/^memra_sched_steps_total //p')
		[ $((steps - before)) -lt "$tokens" ] && { together=1; break; }
		before=$steps
	done
	[ "$together" = 1 ]
}

@test "reuse is keyed by the image: one of the same size never matches, the same one comes back" {
	need_py openai
	png "$P/p1.png" 61 47 1
	png "$P/p2.png" 61 47 2
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_PREFILL_CHUNK=32
	long="Describe the picture in great detail, every colour and every shape of it, please."
	w1=$(want 12 "$long" "$P/p1.png")
	w2=$(want 12 "$long" "$P/p2.png")
	[ "$(jq .content <<<"$w1")" != "$(jq .content <<<"$w2")" ]	# the images tell apart
	# (the image's 63 rows start in the prompt's first chunk of 32: no block before it)
	c=()
	for f in p1 p2 p1 p2; do
		run -0 $SV "$URL" chat g 12 --logprobs "@$P/$f.png" "$long"
		same "$(want 12 "$long" "$P/$f.png")" "$output"
		c+=("$(jq .cached_tokens <<<"$output")")
	done
	[ "${c[0]}" = 0 ]	# p2's rows are p1's ids, not p1's
	[ "${c[1]}" = 0 ]
	[ "${c[2]}" -gt 64 ]	# each again: resumed past its rows
	[ "${c[3]}" -gt 64 ]
	# text before the image is reused (the chunks before it), the image never
	sys=$(printf 'You are a careful assistant who looks at pictures. %.0s' 1 2 3 4)
	run -0 $SV "$URL" chat g 12 --system "$sys" "@$P/p1.png" "$long"
	a1=$output
	run -0 $SV "$URL" chat g 12 --system "$sys" "@$P/p2.png" "$long"
	a2=$output
	[ "$(jq .cached_tokens <<<"$a2")" -ge 32 ]
	[ "$(jq .cached_tokens <<<"$a2")" -lt "$(jq .prompt_tokens <<<"$a2")" ]
	stop_serve
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_PREFILL_CHUNK=32 \
	    MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	run -0 $SV "$URL" chat g 12 --system "$sys" "@$P/p2.png" "$long"
	[ "$(jq .cached_tokens <<<"$output")" = 0 ]
	[ "$(jq -c 'del(.cached_tokens)' <<<"$output")" = "$(jq -c 'del(.cached_tokens)' <<<"$a2")" ]
	run -0 $SV "$URL" chat g 12 --system "$sys" "@$P/p1.png" "$long"
	[ "$(jq -c 'del(.cached_tokens)' <<<"$output")" = "$(jq -c 'del(.cached_tokens)' <<<"$a1")" ]
}

# chat NAME [VAR=VALUE...]: a conversation of the turns in $turns (serve-vision.py conv, 12
# tokens a reply, prompt chunks of 32) on a fresh server into $P/NAME.jsonl, one line a turn
chat() {
	local name=$1
	shift
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_PREFILL_CHUNK=32 "$@"
	$SV "$URL" conv g 12 "${turns[@]}" >"$P/$name.jsonl"
	cp "$LOG" "$P/$name.log"
	stop_serve
	[ "$(grep -c '^{' "$P/$name.jsonl")" = "${#turns[@]}" ]
}

# bits A B: conversations A and B are the same replies, token by token and logprob by
# logprob (the same bits), with the same prompt tokens
bits() { diff <(jq -c 'del(.cached_tokens)' "$P/$1.jsonl") <(jq -c 'del(.cached_tokens)' "$P/$2.jsonl"); }

# metric NAME: the sum of a counter's series on the server's /metrics
metric() {
	curl -s "$URL/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}

# cached NAME: the turns' cached_tokens, one line
cached() { jq -r .cached_tokens "$P/$1.jsonl" | tr '\n' ' ' | sed 's/ $//'; }

@test "multi-turn image chats resume past their images with a cold prefill's bits (pool, prefix cache, both)" {
	need_py openai
	long="Describe the picture in great detail, every colour and every shape of it, please."
	# images in turns 1 and 2 (its first two turns: a 2-turn chat)
	turns=("@$V/images/a.png|$long" "@$V/images/b.jpg|And this one? $long" "Compare them.")
	chat cold MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	[ "$(cached cold)" = "0 0 0" ]
	for how in pool cache both; do
		case $how in
		pool) chat $how MEMRA_PREFIX_CACHE_MB=0 ;;
		cache) chat $how MEMRA_REUSE_POOL=0 ;;
		both) chat $how ;;
		esac
		bits cold $how
		read -r c1 c2 c3 <<<"$(cached $how)"
		p1=$(jq -s '.[0].prompt_tokens' "$P/$how.jsonl")
		[ "$c1" = 0 ]
		[ "$c2" -gt 64 ]		# past a.png's 63 rows, near turn 1's start
		[ "$c3" -gt $((p1 + 60)) ]	# past b.jpg's 60 rows, after all of turn 1
	done
	grep -q '^\[worker\] g: reuse: [0-9]* committed tokens resumed' "$P/pool.log"
	# images in turns 2 and 3, the first one's image again in turn 3
	turns=("$long" "@$V/images/b.jpg|$long" "@$V/images/b.jpg|@$V/images/a.png|Compare them.")
	chat cold3 MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	chat both3
	bits cold3 both3
	read -r c1 c2 c3 <<<"$(cached both3)"
	p1=$(jq -s '.[0].prompt_tokens' "$P/both3.jsonl")
	[ "$c2" -gt 0 ]
	[ "$c3" -gt $((p1 + 12 + 60)) ]	# past turn 2's b.jpg, after turn 1 and its reply
}

@test "chunks of 128, blocks of 64: image chats resume at blocks inside chunks with a cold prefill's bits" {
	need_py openai
	long="Describe the picture in great detail, every colour and every shape of it, please."
	turns=("@$V/images/a.png|$long" "@$V/images/b.jpg|And this one? $long" "Compare them." "And the first one again?")
	chat cold MEMRA_PREFILL_CHUNK=128 MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	for how in pool cache; do
		case $how in
		pool) chat $how MEMRA_PREFILL_CHUNK=128 MEMRA_PREFIX_CACHE_MB=0 ;;
		cache) chat $how MEMRA_PREFILL_CHUNK=128 MEMRA_REUSE_POOL=0 ;;
		esac
		grep -q '^\[sched\] g: prefix cache: off\|blocks of 64 tokens' "$P/$how.log"
		bits cold $how
		# each turn resumes at the turn before's last block of 64 (no image runs
		# across it here), one inside a chunk of 128 (main: chunk ends only)
		jq -s -e '[range(1; length) as $t | .[$t].cached_tokens >= ((.[$t - 1].prompt_tokens - 1) / 64 | floor) * 64] | all' "$P/$how.jsonl"
		jq -s -e 'map(.cached_tokens % 64 == 0) | all' "$P/$how.jsonl"
		jq -s -e 'map(.cached_tokens % 128 == 64) | any' "$P/$how.jsonl"
	done
}

@test "a different image of the same size in a conversation's history is a miss, never another's rows" {
	need_py openai
	png "$P/p1.png" 61 47 1		# a.png's size: the same 63 image rows
	long="Describe the picture in great detail, every colour and every shape of it, please."
	turns=("@$P/p1.png|$long" "@$V/images/b.jpg|And this one? $long")
	chat cold MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	# on a server that holds a.png's conversation, turn for turn
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_PREFILL_CHUNK=32
	run -0 $SV "$URL" conv g 12 "@$V/images/a.png|$long" "@$V/images/b.jpg|And this one? $long"
	$SV "$URL" conv g 12 "${turns[@]}" >"$P/warm.jsonl"
	[ "$(jq -s '.[0].prompt_tokens' "$P/warm.jsonl")" = "$(jq -r .prompt_tokens <<<"${lines[0]}")" ]
	bits cold warm
	[ "$(jq -s '.[0].cached_tokens' "$P/warm.jsonl")" = 0 ]
	[ "$(jq -s '.[1].cached_tokens' "$P/warm.jsonl")" -gt 64 ]	# its own turn 1's rows
}

@test "Gemma-4's assistant drafts for image requests: plain decode's replies, greedy and sampled" {
	need_py openai
	long="Describe the picture in great detail, every colour and every shape of it, please."
	reqs() {
		$SV "$URL" chat g 24 "@$V/images/a.png" "What is this?"
		$SV "$URL" chat g 24 --logprobs "@$V/images/a.png" "@$V/images/b.jpg" "Compare them."
		$SV "$URL" chat g 24 --stream "@$V/images/b.jpg" "$long"
		$SV "$URL" chat g 24 --sample 0.9 7 "@$V/images/a.png" "$long"
		$SV "$URL" chat g 24 --sample 0.9 8 --logprobs "@$V/images/b.jpg" "What is this?"
		$SV "$URL" many g 24 "@$V/images/a.png|$long" "@$V/images/b.jpg|And this?" \
		    "What is the capital of France?" "@$V/images/b.jpg|@$V/images/a.png|$long"
	}
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_PREFILL_CHUNK=32 MEMRA_MAX_SESSIONS=4
	reqs >"$P/plain"
	stop_serve
	! grep '^error' "$P/plain" || false	# (a failure shows them)
	[ "$(wc -l <"$P/plain")" = 9 ]
	same "$(want 24 "What is this?" "$V/images/a.png")" "$(sed -n 1p "$P/plain")"
	same "$(want 24 "Compare them." "$V/images/a.png" "$V/images/b.jpg")" "$(sed -n 2p "$P/plain")"
	for k in 3 by-load; do
		start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_PREFILL_CHUNK=32 \
		    MEMRA_MAX_SESSIONS=4 MEMRA_DRAFT="$DATA/gemma4/g4-assistant" MEMRA_SPEC_K=${k#by-load}
		grep -qx '\[model\] g: ctx=4096 K=3 (assistant speculative decode for greedy requests)' "$LOG"
		if [ $k = 3 ]; then	# every greedy session drafts: an image request alone did
			# (its first chunk no other request's: nothing of it is reused below)
			run -0 $SV "$URL" chat g 24 "Before the picture: $long" "@$V/images/b.jpg"
			[ "$(metric memra_spec_rounds_total)" -gt 0 ]
			[ "$(metric memra_spec_drafted_tokens_total)" -gt 0 ]
		fi
		reqs | diff "$P/plain" -
		stop_serve
	done
	# a conversation of images, drafted and resumed, is the cold plain one
	turns=("@$V/images/a.png|$long" "@$V/images/b.jpg|And this one? $long" "Compare them.")
	chat cold MEMRA_PREFIX_CACHE_MB=0 MEMRA_REUSE_POOL=0
	chat spec MEMRA_DRAFT="$DATA/gemma4/g4-assistant" MEMRA_SPEC_K=3
	bits cold spec
	[ "$(jq -s '.[2].cached_tokens' "$P/spec.jsonl")" -gt 0 ]
}

@test "image errors are 400s with one-line messages; the server goes on" {
	need_py openai
	png "$P/big.png" 620 600 3		# 1.1 MB
	png "$P/half.png" 420 420 4		# 0.5 MB
	printf 'GIF89a' >"$P/x.gif"
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_MAX_IMAGES=2 MEMRA_IMAGE_MB=1 \
	    MEMRA_REQUEST_IMAGE_MB=1
	e() { run -0 $SV "$URL" chat g 4 "$@"; [ "${#lines[@]}" = 1 ]; }
	e url=http://example.com/a.png hi
	[ "$output" = "error 400 'messages[0].content[0].image_url.url': an http(s) URL: this server fetches nothing: send the image as a data: URI (base64)" ]
	e hi url=HTTPS://example.com/a.png
	[ "$output" = "error 400 'messages[0].content[1].image_url.url': an http(s) URL: this server fetches nothing: send the image as a data: URI (base64)" ]
	e "url=data:image/png;base64,iVBO*w0KGgo=" hi
	[ "$output" = "error 400 'messages[0].content[0].image_url.url': bad base64 at byte 4 of the data" ]
	e "url=data:image/png;base64,aGVsbG8=" hi
	[ "$output" = "error 400 'messages[0].content[0]': not a PNG or JPEG image" ]
	e "url=data:image/png,rawbytes" hi
	[ "$output" = "error 400 'messages[0].content[0].image_url.url': a data: URI without ';base64': the image must be base64" ]
	e "url=data:text/plain;base64,aGk=" hi
	[ "$output" = "error 400 'messages[0].content[0].image_url.url': a data: URI of 'text/plain': not an image" ]
	e "@$P/x.gif" hi
	[ "$output" = "error 400 'messages[0].content[0]': not a PNG or JPEG image" ]
	e "@$V/images/a.png" "@$P/big.png" hi
	[[ $output == "error 400 'messages[0].content[1]': an image of "*" bytes: more than the 1048576 an image may have" ]]
	e "@$P/half.png" "@$P/half.png" hi
	[ "$output" = "error 400 'messages[0].content[1]': the request's images pass the 1048576 bytes a request may send" ]
	e "@$V/images/a.png" "@$V/images/a.png" "@$V/images/a.png" hi
	[ "$output" = "error 400 'messages[0].content[2]': more than 2 images in a request" ]
	e "@$V/images/a.png" "look: <|image|>"
	[ "$output" = "error 400 the prompt has 2 image markers for 1 images" ]
	run -0 http POST /v1/chat/completions '{"messages": [{"role": "user", "content": [{"type": "image"}]}]}'
	[[ $output == "400 {\"error\": {\"message\": \"'messages[0].content[0]': type 'image' carries no image: send an 'image_url' part with a data: URI\""* ]]
	run -0 http POST /v1/chat/completions '{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": 3}]}]}'
	[[ $output == "400 {\"error\": {\"message\": \"'messages[0].content[0].image_url': an object with a 'url' string is required\""* ]]
	run -0 $SV "$URL" chat g 6 "@$V/images/a.png" "What is this?"
	same "$(want 6 "What is this?" "$V/images/a.png")" "$output"
}

@test "an image whose patch grid passes the tower's position tables is a 400 naming the part; the server goes on" {
	need_py openai
	# an mmproj GGUF's budget of 280: wide.png (400x9) is 333x6 patches, the tables hold 224
	start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_GEMMA_MMPROJ="$V/mmproj-f32.gguf"
	run -0 $SV "$URL" chat g 4 "@$V/images/a.png" "@$V/images/wide.png" hi
	[ "$output" = "error 400 'messages[0].content[1]': image of 400x9: 1332x24 for 280 soft tokens is 333x6 patches, past the tower's 224 positions a side" ]
	run -0 $SV "$URL" chat g 4 "@$V/images/a.png" "What is this?"
	[[ $output != error* ]]
	run-gen -t 2 -n 4 --ids --mmproj "$V/mmproj-f32.gguf" --image "$V/images/a.png" "$V" \
	    "What is this?" 2>"$P/err" >/dev/null
	[ "$(jq .prompt_tokens <<<"$output")" = "$(sed -n 's/^prompt tokens=\([0-9]*\) .*/\1/p' "$P/err")" ]
}

@test "without MEMRA_GEMMA_VISION an image part is a 400 that says so" {
	need_py openai
	start_serve MEMRA_MODELS="g=$V"
	! grep -q '^\[vision\]' "$LOG" || false
	run -0 $SV "$URL" chat g 4 "@$V/images/a.png" "What is this?"
	[ "$output" = "error 400 'messages[0].content[0]': images are not enabled on this server" ]
	run -0 $SV "$URL" chat g 4 "What is this?"
	[[ $output == '{"content": '* ]]
}

@test "serve(1) documents each vision variable in --help, OPTIONS and ENVIRONMENT" {
	command -v mandoc >/dev/null || skip "mandoc not installed"
	man=$(mandoc -Tascii "$TOP/man/serve.1" | sed 's/.\x08//g')
	for v in MEMRA_GEMMA_VISION MEMRA_GEMMA_MMPROJ MEMRA_GEMMA_VISION_DEVICE MEMRA_IMAGE_TOKENS \
	    MEMRA_MAX_IMAGES MEMRA_IMAGE_MB MEMRA_REQUEST_IMAGE_MB; do
		serve --help | grep -q "($v[,)]"
		sed -n '/^ENVIRONMENT/,/^EXIT STATUS/p' <<<"$man" | grep -q "$v"
	done
	for o in gemma-vision mmproj gemma-vision-device image-tokens max-images image-mb \
	    request-image-mb; do
		sed -n '/^OPTIONS/,/^ENVIRONMENT/p' <<<"$man" | grep -q -- "--$o"
	done
}

# bats test_tags=gpu
@test "on cuda a tower whose image rows are bidirectional serves: run-gen's prompt, a reply alone as beside others" {
	need_py openai
	SERVE_DEVICE=cuda start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 MEMRA_MAX_SESSIONS=4 \
	    MEMRA_PREFILL_CHUNK=32
	grep -q "image rows bidirectional ($V" "$LOG"
	# the tower on the models' GPU by default, its memory taken before the sessions are sized
	grep -q '^\[vision\] images in chat messages as data: URIs: .*; the tower on cuda' "$LOG"
	tower=$(grep -n '^\[vision\] the tower takes [0-9]* MiB of cuda.*, before the sessions are sized$' "$LOG" | cut -d: -f1)
	sessions=$(grep -n '^\[sched\] g: ' "$LOG" | head -1 | cut -d: -f1)
	[ -n "$tower" ]
	[ -n "$sessions" ]
	[ "$tower" -lt "$sessions" ]
	run -0 $SV "$URL" chat g 16 "@$V/images/a.png" "What is this?"
	alone=$output
	[ "$(jq .prompt_tokens <<<"$alone")" = "$(jq .prompt_tokens <<<"$(want 1 "What is this?" \
	    "$V/images/a.png")")" ]
	run -0 $SV "$URL" many g 16 "@$V/images/a.png|What is this?" "What is the capital of France?" \
	    "@$V/images/b.jpg|@$V/images/a.png|What is this?"
	[ "${#lines[@]}" = 3 ]
	[ "$(jq -c .content <<<"${lines[0]}")" = "$(jq -c .content <<<"$alone")" ]
}

# bats test_tags=gpu
@test "MEMRA_GEMMA_VISION_DEVICE=cuda: the tower on the GPU, run-gen --device cuda --image's tokens" {
	need_py openai
	SERVE_DEVICE=cuda start_serve MEMRA_MODELS="g=$V" MEMRA_GEMMA_VISION=1 \
	    MEMRA_GEMMA_VISION_DEVICE=cuda MEMRA_MAX_SESSIONS=4
	grep -q '^\[vision\] images in chat messages as data: URIs: .*; the tower on cuda' "$LOG"
	run -0 $SV "$URL" chat g 16 "@$V/images/a.png" "What is this?"
	same "$(WANT_DEVICE=cuda want 16 "What is this?" "$V/images/a.png")" "$output"
	run -0 $SV "$URL" chat g 16 "@$V/images/b.jpg" "@$V/images/wide.png" "What are these?"
	same "$(WANT_DEVICE=cuda want 16 "What are these?" "$V/images/b.jpg" \
	    "$V/images/wide.png")" "$output"
}
