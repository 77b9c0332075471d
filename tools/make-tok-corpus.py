#!/usr/bin/env python3
"""Write the tokenizer test corpus t/data/tok-corpus/*.txt (bytes, deterministic).

Each file stresses one thing the pre-tokenizers and merges must get exactly right;
t/peer/tok_hf.py encodes every file with the reference and with tok-cli.
Usage: tools/make-tok-corpus.py [DIR]
"""
import os
import random
import sys

CODE = '''#include <stdio.h>
int main(int argc, char **argv) {
\tfor (int i = 0; i < argc; i++) printf("%d: %s\\n", i, argv[i]);
\treturn 0; // done
}
def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a

class Foo(object):
    def __init__(self, x=None, **kw):
        self.x = x or {}  # type: dict[str, list[int]]
        self._cache = [i ** 2 for i in range(10) if i % 3 == 0]

if __name__ == "__main__":
    print(fib(30), Foo().x, 0x1F, 1e-9, 3.14159, -42, 1_000_000)
    s = 'it''s' + "don't" + r"\\d+\\s*" + f"{fib(5)!r:>10}"
    xs = {k: v for k, v in zip("abc", [1, 2, 3])}; assert xs["a"] == 1, "bad"
const f = async (a, b) => { await fetch(`/api/${a}?q=${b}`); return a ?? b ?? null; };
SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%smith%' ORDER BY id DESC;
<div class="x" data-id='7'>&amp; &lt;tag&gt;</div>
    \t  \t mixed indentation\t\t
'''

PROSE = '''The quick brown fox jumps over the lazy dog. "Don't panic," she said; it's 4:30 p.m. on Jan. 5th, 2024.
They'll be here soon, won't they? I'd say we've got time... or maybe not! THE END'S NEAR; WE'LL SEE. YOU'RE IT. I'M OK.
Prices rose 12.5% (from $1,234.56 to $1,388.88) — an em-dash – en-dash, ‘curly’ “quotes” and … ellipsis.
Ünïcödé façade naïve café résumé coöperate Straße ÆØÅ æøå œuvre İstanbul ﬁnance ﬀ ǅ ǈ.
Привет, мир! Это тест. Ελληνικά: Καλημέρα κόσμε. עברית: שָׁלוֹם עוֹלָם. العربية: مرحبا بالعالم، كيف حالك؟
हिन्दी: नमस्ते दुनिया। ภาษาไทย: สวัสดีชาวโลก ქართული: გამარჯობა 한국어: 안녕하세요 세계 Tiếng Việt: Xin chào thế giới.
'''

CJK = '''中文文本测试：你好，世界！这是一个用于分词器的测试句子。今天是2024年11月30日，天气晴朗。
日本語のテキスト：こんにちは世界。カタカナとひらがな、漢字が混ざっています。ｆｕｌｌｗｉｄｔｈ　ｓｐａｃｅ　１２３。
繁體中文：這是一個測試。「引號」『雙引號』【括號】《書名號》〈單書名號〉※★☆○●◎◇◆□■△▲▽▼→←↑↓
𠀀𠀁𠀂 𪜀 𫝀 𬺰 𰀀 𱍐 CJK extension characters: 𠮷野家 𩸽
'''

EMOJI = ('Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 🇺🇸🇯🇵 ❤️ ✌🏿 🧑🏻‍💻 1️⃣ #️⃣ 🫠 🪿 '
         'ZWJ: 👩‍❤️‍💋‍👨 text😀text 😀😀😀😀😀😀😀😀 ☺︎ ☺️ ©️ ™ ® ℃ ℉ № ⅓ ½ ¾ ² ³ ¹ ⁴ ₀ ₁\n')

MARKS = ('Combining: e\u0301 a\u0300 o\u0308 n\u0303 c\u0327 A\u030A \u0301\u0301\u0301 x\u0336y\u0336z\u0336 '
         'Z\u0351\u0307\u0300a\u0358\u0310\u0302l\u0363\u033eg\u0350o\u0308 '
         'Devanagari: क्षत्रिय ज़ि़ंदगी Thai: กำ ที่ Hebrew: בְּרֵאשִׁית Arabic: بِسْمِ اللَّهِ '
         'Vietnamese: Tiê\u0301ng Vie\u0323\u0302t  marks alone: \u0300\u0301 '
         'mark after digit 1\u0301 2\u20DD after space \u0301x after punct !\u0301 \u20E3\n')

DECOMPOSED = ('NFC input: cafe\u0301 re\u0301sume\u0301 Cafe\u0301 E\u0301COLE \u00e9\u0301 e\u0301\u0301 '
              'a\u0328\u0301 q\u0307\u0323 \u1e9b\u0323 A\u030a \u212b \u2126 \u0958 \u0344 '
              'Hangul jamo: \u1112\u1161\u11ab\u1100\u1173\u11af \u1100\u1161 \u110b\u1175\u11a8 '
              '\uac00\u11a8 \u1100\u0301\u1161 syllables \ud55c\uae00 kana \u304b\u3099 \u30cf\u309a '
              'Vie\u0323\u0302t Vie\u0302\u0323t x\u0315\u0300\u05ae\u0300b \u0b47\u0b3e \u1df6\u0301 '
              '\U0001d15e\U0001d165 \ufb01 \u2460 \u0301start\n')

WHITESPACE = ('a  b   c    d\t\te\t \tf \n\n\ng\r\n\r\nh\r\r\ri \n \n j'
              + ' ' * 17 + 'k' + '\t' * 9 + 'l' + '\n' * 12 + 'm' + ' \u00a0\u2003\u3000 n'
              + '\u2028\u2029\u0085\u000b\u000c o' + ' \r\n ' * 5 + 'p   \n   ' + 'q\n'
              + '    \n' + '  \t  \r\n\t' + ' ' * 40 + '\n' + '\r' + ' x' + '  ' + '\n ')

CRLF = 'line one\r\nline two\r\n\r\n  indented\r\n\tTab\r\n\r\n\r\nend\r\n' * 3 + 'lone\rCR\rand\nLF\n\r\n\n\r'

DIGITS = ('0 1 12 123 1234 12345 123456 1234567 12345678901234567890 3.14159 -2.5e10 1,000,000 '
          '0x7fff 0b1010 007 2024-11-30 12:34:56 +1-555-0100 ١٢٣٤٥ ۱۲۳ ०१२३ ๑๒๓ ①②③ Ⅻ ⅷ ¼ 𝟘𝟙𝟚 '
          'a1b2c3 x86_64 v2.0.1 i18n 3rd 21st 1000s $100 100% #1 99¢ 42°\n')

CONTRACTIONS = ("it's It'S IT'S I'm I'M we're WE'RE you've YOU'VE he'll HE'LL she'd SHE'D can't won't "
                "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x 'll' ''s ' s '\n's "
                "rock'n'roll o'clock y'all ma'am don’t it’s 'ſ 'K 'ﬆ 'ſt \u212a 'Ss 'sS 'Re 'rE 'lL\n")

SPECIAL_LIKE = ('<|endoftext|> <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n'
                '<think>\nhmm\n</think>\n<tool_call>{"name": "f"}</tool_call> <|im_end|><|im_end|>'
                '<|im_start|><|im_start|> <| im_end |> <|im_end <bos><eos><pad><start_of_turn>'
                '<end_of_turn> <unk> [INST] </s> <s> <|endoftext|x <|<|endoftext|>|>\n')


def invalid_utf8():
    parts = [b'valid ', b'\x80', b' lone continuation ', b'\xbf\xbf', b' truncated2 \xc3',
             b' truncated3 \xe2\x82', b' truncated4 \xf0\x9f\x98', b' overlong \xc0\xaf \xe0\x80\xaf',
             b' surrogate \xed\xa0\x80 \xed\xbf\xbf', b' beyond \xf4\x90\x80\x80 \xf5\x80 \xff\xfe',
             b' mixed \xe4\xbd\xa0\xe5 \xa5\xbd', b' nul \x00 byte', b' C1 \xc2\x80\xc2\x9f',
             b' bom \xef\xbb\xbf', b' end \xf0\x9f']
    return b''.join(parts)


def random_mix(rng, n):
    pools = [
        [chr(c) for c in range(0x20, 0x7f)],
        list(' \t\n\r'),
        [chr(c) for c in range(0xa0, 0x250)],
        [chr(c) for c in range(0x300, 0x370)],
        [chr(c) for c in range(0x400, 0x460)],
        [chr(c) for c in range(0x4e00, 0x4e80)],
        [chr(c) for c in range(0x1f600, 0x1f650)],
        ['\u200d', '\ufe0f', "'", "'s", "'LL", '  ', '\r\n', '123', '٣', 'ǅ'],
    ]
    out = []
    for _ in range(n):
        out.append(rng.choice(rng.choice(pools)))
    return ''.join(out)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..', 't', 'data', 'tok-corpus')
    os.makedirs(d, exist_ok=True)
    rng = random.Random(20261130)
    files = {
        'code.txt': CODE.encode(),
        'prose.txt': PROSE.encode(),
        'cjk.txt': CJK.encode(),
        'emoji.txt': EMOJI.encode(),
        'marks.txt': MARKS.encode(),
        'decomposed.txt': DECOMPOSED.encode(),
        'whitespace.txt': WHITESPACE.encode(),
        'crlf.txt': CRLF.encode(),
        'digits.txt': DIGITS.encode(),
        'contractions.txt': CONTRACTIONS.encode(),
        'special-like.txt': SPECIAL_LIKE.encode(),
        'invalid-utf8.txt': invalid_utf8(),
        'long-runs.txt': ('x' * 3000 + ' ' * 3000 + '!' * 500 + '1' * 700 + '\n' * 300 + 'é' * 400
                          + '\u0301' * 200 + '😀' * 200 + ' a' * 500).encode(),
        'random.txt': random_mix(rng, 20000).encode(),
        'empty.txt': b'',
        'one-space.txt': b' ',
    }
    for name, data in files.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
