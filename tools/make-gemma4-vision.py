#!/usr/bin/env python3
"""Make the tiny random Gemma-4 vision fixture t/data/gemma4/g4-vision.

Needs transformers 5.17 with torch, Pillow and torchvision (the image
processor's default backend): /work/torchenv plus a venv that adds pillow
and torchvision (`pip install --no-deps torchvision` beside that torch).

Writes OUT/g4-vision/:
  config.json, model.safetensors  Gemma4ForConditionalGeneration in float32 as
      save_pretrained writes it: g4-dense's text model (tools/make-gemma4-models.py's
      BASE, 5 layers s s f s f, soft-cap 30) with use_bidirectional_attention
      "vision", and a vision tower of 2 layers, hidden 32, 2 heads of 16, FFN 48,
      patch 4 (so that images stay small), pooling 3, position tables of 224,
      clipped linears (finite random bounds) and standardize (31B's) both on;
      every norm weight, bound, std_bias and std_scale drawn at random
  preprocessor_config.json  the image processor's (patch 4, max_soft_tokens 70)
  tokenizer.json, tokenizer_config.json  t/data/st/llama's BPE plus <|image> 284,
      <|image|> 285, <image|> 286, <|turn> 287, <turn|> 288 as special tokens, and a
      Gemma-4-style chat template (an image content item renders as
      "\\n\\n<|image|>\\n\\n", as Gemma 4's own template does)
  images/*.png, *.jpg   test images (PIL-made); images/NAME.hf.png (the prompt's
      two): the uint8 image transformers' Gemma4ImageProcessor (torchvision
      backend) resized it to
      (its pixel_values are exactly these bytes times float32(1/255))
  pixels.json   per test image: the processor's size, patch grid, soft tokens,
      sha256 of its uint8 resized image, and how many bytes the PIL backend's
      resize (Gemma4ImageProcessorPil) differs by
  refs.json     a prompt with two images (ids, the image files, the processor's
      pixel values via images/*.hf.png), the logits of every position and a
      16-token greedy continuation (re-forwards; generate() agrees), float32, eager
  mmproj-f32.gguf  llama.cpp's converter's mmproj (convert_hf_to_gguf.py --mmproj,
      projector gemma4v), when LLAMACPP (its source tree) is given

usage: make-gemma4-vision.py OUTDIR [LLAMACPP]   (run from the top of the tree)
"""
import hashlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

spec = importlib.util.spec_from_file_location("g4m", os.path.join(os.path.dirname(__file__),
                                                                  "make-gemma4-models.py"))
g4m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(g4m)

S, F = g4m.S, g4m.F
TEXT = {k: v for k, v in g4m.BASE.items() if k != "model_type"}
TEXT.update(num_hidden_layers=5, layer_types=[S, S, F, S, F], final_logit_softcapping=30.0,
            use_bidirectional_attention="vision")
VISION = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=2,
              num_key_value_heads=2, head_dim=16, patch_size=4, pooling_kernel_size=3,
              position_embedding_size=224, use_clipped_linears=True, standardize=True,
              rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh")
BOI, IMG, EOI = 284, 285, 286
PROC = dict(patch_size=4, max_soft_tokens=70, pooling_kernel_size=3)

# The test images: (name, maker).  The first two go into the model's prompt.
def _grad(w, h, seed):
    g = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([128 + 100 * np.sin(x / (3 + c) + y / (5 + 2 * c) + c) for c in range(3)], -1)
    img += g.normal(0, 12, img.shape)
    img[h // 3:h // 2, w // 4:w // 2] = [250, 30, 40]          # a sharp block
    return np.clip(img, 0, 255).astype(np.uint8)


def images():
    from PIL import Image
    out = {}
    out["a.png"] = ("PNG", Image.fromarray(_grad(61, 47, 1)), {})           # upscaled, 63 tokens
    out["b.jpg"] = ("JPEG", Image.fromarray(_grad(200, 90, 2)), {"quality": 87})  # downscaled, 60
    out["gray.png"] = ("PNG", Image.fromarray(_grad(33, 70, 3)[..., 0]), {})
    out["pal.png"] = ("PNG", Image.fromarray(_grad(64, 64, 4)).quantize(16), {})
    rgba = np.dstack([_grad(50, 40, 5), np.linspace(0, 255, 50 * 40).reshape(40, 50)
                      .astype(np.uint8)])
    out["rgba.png"] = ("PNG", Image.fromarray(rgba, "RGBA"), {})
    out["prog.jpg"] = ("JPEG", Image.fromarray(_grad(130, 130, 6)), {"progressive": True,
                                                                      "quality": 80})
    out["grayj.jpg"] = ("JPEG", Image.fromarray(_grad(96, 64, 7)[..., 1]), {"quality": 90})
    out["wide.png"] = ("PNG", Image.fromarray(_grad(400, 9, 8)), {})        # one side rounds to 0
    out["exact.png"] = ("PNG", Image.fromarray(_grad(108, 84, 9)), {})      # already a target
    return out


def processors():
    from transformers.models.gemma4.image_processing_gemma4 import Gemma4ImageProcessor
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil
    return Gemma4ImageProcessor(**PROC), Gemma4ImageProcessorPil(**PROC)


def resized_u8(px, pos, n_tok, exact=True):
    """The processor's pixel_values [max_patches][p*p*3] back to the uint8 image."""
    p = PROC["patch_size"]
    n = n_tok * PROC["pooling_kernel_size"] ** 2
    pos = pos[:n]
    gw, gh = int(pos[:, 0].max()) + 1, int(pos[:, 1].max()) + 1
    v = px[:n].reshape(gh, gw, p, p, 3).transpose(0, 2, 1, 3, 4).reshape(gh * p, gw * p, 3)
    u8 = np.rint(v * 255.0).astype(np.uint8)
    # the processor's values are exactly u8 * float32(1/255): check it, so that the
    # PNG of the bytes carries its pixel values without loss
    assert not exact or np.array_equal(u8.astype(np.float32) * np.float32(1 / 255), v), "u8/255"
    return u8, gw, gh


def process(proc, img, exact=True):
    out = proc(images=[img], return_tensors="pt")
    n = int(out["num_soft_tokens_per_image"][0])
    return resized_u8(out["pixel_values"][0].numpy(), out["image_position_ids"][0].numpy(), n,
                      exact) + (n,)


def save_images(d):
    from PIL import Image
    tv, pil = processors()
    os.makedirs(os.path.join(d, "images"), exist_ok=True)
    info = {}
    for name, (fmt, img, kw) in images().items():
        path = os.path.join(d, "images", name)
        img.save(path, fmt, **kw)
        loaded = Image.open(path)
        loaded.load()
        u8, gw, gh, n = process(tv, loaded)
        u8p, _, _, _ = process(pil, Image.open(path), exact=False)  # float64 rescale
        if name in PROMPT_IMAGES:
            Image.fromarray(u8).save(os.path.join(d, "images", name.rsplit(".", 1)[0] + ".hf.png"))
        info[name] = {"size": [loaded.width, loaded.height], "mode": loaded.mode,
                      "resized": [u8.shape[1], u8.shape[0]], "grid": [gw, gh], "tokens": n,
                      "sha256": hashlib.sha256(u8.tobytes()).hexdigest(),
                      "pil_backend_bytes_differing": int((u8 != u8p).sum()),
                      "pil_backend_max_diff": int(np.abs(u8.astype(int) - u8p).max())}
        print(" ", name, info[name])
    return info


def randomize(model):
    g4m.randomize(model)
    with torch.no_grad():
        for mname, mod in model.named_modules():
            if hasattr(mod, "input_min"):       # Gemma4ClippableLinear: finite bounds that clip
                mod.input_min.fill_(-float(torch.empty(1).uniform_(1.5, 3.0)))
                mod.input_max.fill_(float(torch.empty(1).uniform_(1.5, 3.0)))
                mod.output_min.fill_(-float(torch.empty(1).uniform_(0.3, 0.8)))
                mod.output_max.fill_(float(torch.empty(1).uniform_(0.3, 0.8)))
        vt = model.model.vision_tower
        vt.std_bias.normal_(0.0, 2.0)
        vt.std_scale.uniform_(0.5, 1.5)
        vt.patch_embedder.position_embedding_table.normal_(0.0, 0.5)


def build():
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration
    from transformers.models.gemma4.configuration_gemma4 import (Gemma4TextConfig,
                                                                 Gemma4VisionConfig)
    conf = Gemma4Config(text_config=Gemma4TextConfig(**TEXT),
                        vision_config=Gemma4VisionConfig(**VISION), audio_config=None,
                        boi_token_id=BOI, image_token_id=IMG, eoi_token_id=EOI,
                        tie_word_embeddings=True)
    conf._attn_implementation = "eager"
    conf.text_config._attn_implementation = "eager"
    conf.vision_config._attn_implementation = "eager"
    torch.manual_seed(4711)
    model = Gemma4ForConditionalGeneration(conf).to(torch.float32)
    randomize(model)
    model.eval()
    return model


def save(model, d):
    from safetensors.torch import load_file, save_file
    model.save_pretrained(d, safe_serialization=True)
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    save_file({k: v.contiguous() for k, v in sorted(sd.items())}, path, metadata={"format": "pt"})
    os.chmod(path, 0o644)
    if os.path.exists(os.path.join(d, "generation_config.json")):
        os.remove(os.path.join(d, "generation_config.json"))
    tv, _ = processors()
    tv.save_pretrained(d)
    return sorted(sd)


TEMPLATE = (
    "{{- bos_token -}}\n"
    "{%- for message in messages -%}\n"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}\n"
    "{{- '<|turn>' + role + '\\n' -}}\n"
    "{%- if message['content'] is string -%}\n"
    "{{- message['content'] | trim -}}\n"
    "{%- else -%}\n"
    "{%- for item in message['content'] -%}\n"
    "{%- if item['type'] == 'text' -%}\n"
    "{{- item['text'] | trim -}}\n"
    "{%- elif item['type'] == 'image' -%}\n"
    "{{- '\\n\\n<|image|>\\n\\n' -}}\n"
    "{%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<turn|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|turn>model\\n' -}}\n"
    "{%- endif -%}\n")


def tokenizer_files(d):
    with open("t/data/st/llama/tokenizer.json") as f:
        tj = json.load(f)
    for i, s in zip(range(284, 289), ["<|image>", "<|image|>", "<image|>", "<|turn>", "<turn|>"]):
        tj["added_tokens"].append({"id": i, "content": s, "single_word": False, "lstrip": False,
                                   "rstrip": False, "normalized": False, "special": True})
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open("t/data/st/llama/tokenizer_config.json") as f:
        tc = json.load(f)
    tc["chat_template"] = TEMPLATE
    tc["eos_token"] = "<turn|>"
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=1)


# The prompt: text ids, image a, text, image b, text (ids of the 284-token BPE vocabulary).
PRE, MID, POST = [280, 5, 17, 250], [3, 99, 42], [7, 1, 64]
PROMPT_IMAGES = ["a.png", "b.jpg"]
GREEDY_NEW = 16


def model_inputs(d, ntoks):
    from PIL import Image
    ids = list(PRE) + [BOI] + [IMG] * ntoks[0] + [EOI] + MID + [BOI] + [IMG] * ntoks[1] + \
        [EOI] + POST
    tv, _ = processors()
    imgs = [Image.open(os.path.join(d, "images", n)) for n in PROMPT_IMAGES]
    pv = tv(images=imgs, return_tensors="pt")
    assert [int(x) for x in pv["num_soft_tokens_per_image"]] == ntoks
    return ids, pv


def forward(model, ids, pv):
    t = torch.tensor([ids])
    with torch.no_grad():
        return model(input_ids=t, pixel_values=pv["pixel_values"],
                     image_position_ids=pv["image_position_ids"],
                     mm_token_type_ids=(t == IMG).long(), use_cache=False).logits[0].float()


def refs(model, d, info):
    ntoks = [info[n]["tokens"] for n in PROMPT_IMAGES]
    ids, pv = model_inputs(d, ntoks)
    lg = forward(model, ids, pv)
    seq = list(ids)
    for _ in range(GREEDY_NEW):
        seq.append(int(forward(model, seq, pv)[-1].argmax()))
    t = torch.tensor([ids])
    with torch.no_grad():
        g = model.generate(input_ids=t, pixel_values=pv["pixel_values"],
                           image_position_ids=pv["image_position_ids"],
                           mm_token_type_ids=(t == IMG).long(), max_new_tokens=GREEDY_NEW,
                           min_new_tokens=GREEDY_NEW, do_sample=False)[0].tolist()
    assert g == seq, (g, seq)
    # the bidirectional rule matters: causal image rows give other logits
    with torch.no_grad():
        causal = model(input_ids=t, pixel_values=pv["pixel_values"],
                       image_position_ids=pv["image_position_ids"],
                       use_cache=False).logits[0].float()
    print("  image rows bidirectional vs causal: max |diff| %.3g" % float((lg - causal).abs().max()))
    return {"input_ids": ids, "images": PROMPT_IMAGES, "tokens": ntoks,
            "logits": [[float("%.7g" % v) for v in row] for row in lg.tolist()],
            "greedy": seq[len(ids):]}


LLAMACPP_SHIM = r"""
import sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[1] + "/gguf-py")
sys.argv = [sys.argv[1] + "/convert_hf_to_gguf.py"] + sys.argv[2:]
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def mmproj(src, d):
    out = os.path.join(d, "mmproj-f32.gguf")
    subprocess.run([sys.executable, "-c", LLAMACPP_SHIM, src, d, "--mmproj", "--outtype", "f32",
                    "--outfile", out], check=True, stdout=subprocess.DEVNULL)
    os.chmod(out, 0o644)
    return out


def main():
    import transformers
    outdir = sys.argv[1]
    lcpp = sys.argv[2] if len(sys.argv) > 2 else None
    d = os.path.join(outdir, "g4-vision")
    os.makedirs(d, exist_ok=True)
    model = build()
    names = save(model, d)
    tokenizer_files(d)
    info = save_images(d)
    with open(os.path.join(d, "pixels.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "processor": PROC, "images": info},
                  f, indent=1)
    r = refs(model, d, info)
    with open(os.path.join(d, "refs.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "dtype": "float32", "attn": "eager", **r}, f)
    print("g4-vision", sum(p.numel() for p in model.parameters()), "params,", len(names),
          "tensors ->", d)
    if lcpp:
        print("  llama.cpp:", mmproj(lcpp, d))


if __name__ == "__main__":
    main()
