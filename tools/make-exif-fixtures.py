#!/usr/bin/env python3
"""Make the EXIF orientation fixtures t/data/exif (and the corpus t/fuzz/exif).

Needs Pillow (13; no torch): `python3 tools/make-exif-fixtures.py OUTDIR [FUZZDIR]`
from the top of the tree, e.g. OUTDIR t/data/exif, FUZZDIR t/fuzz/exif.

transformers' load_image (image_utils.py, 5.17) turns an image upright with
PIL.ImageOps.exif_transpose before image.convert("RGB"); lib/image does the same for a
JPEG.  Each fixture is a 7x5 JPEG (distinct colours, so that every turn and flip
tells apart) whose APP1 segments this script writes byte for byte: EXIF (a TIFF
block) and XMP as the case needs.  expect.json holds, per file, what Pillow makes of
it: the orientation Image.getexif() reports (null: none) and the size and sha256 of
ImageOps.exif_transpose(image).convert("RGB")'s bytes (row-major, RGB).  Where
Pillow raises (a block that is no TIFF), the entry says so ("raises") and holds the
image as stored: lib/image ignores such a block.

The cases: o1..o8 (little-endian, SHORT, as PIL writes them); be6 (big-endian);
long3 (LONG); sshort2 (SIGNED SHORT); rat6 (RATIONAL 12/2: Pillow compares the
fraction); flt8 (FLOAT 8.0); byte6 (BYTE: Pillow gets bytes, no turn, and the XMP
beside it is not read); cnt2 (SHORT count 2: the first value); dup (two entries of
the tag: the first wins); skip8 (the first entry of an unknown type is skipped, the
second read); ifd1 (the tag in IFD1 only: none); nine (value 9: none); split (the
value out of line in a second Exif segment, which Pillow appends to the first);
big6 (an earlier entry's out-of-line data larger than the block is skipped, the tag
after it read); trunc (an earlier entry's out-of-line data running past the block's
end ends the directory: the tag after it is never read); xmp6, xmp3 (no EXIF: the
XMP packet's tiff:Orientation="6", <tiff:Orientation>3<...>); noor7 (EXIF without
the tag: the XMP's 7); one6 (EXIF 1 wins over XMP 6); badhdr (an Exif segment that
is no TIFF: Pillow reads no tag from it as it looks there for the JPEG's DPI, nor
then the XMP beside it); badhdr-dpi (the same where JFIF has the DPI: Pillow's
exif_transpose raises).

FUZZDIR gets each case's EXIF block (its segments joined, as Pillow joins them) as a
seed of t/fuzz/exif.c.
"""
import hashlib
import io
import json
import os
import struct
import sys

from PIL import Image, ImageOps

XMP_NS = b"http://ns.adobe.com/xap/1.0/\x00"


def base_jpeg(dpi=None):
    """A 7x5 RGB JPEG of distinct colours, no APP segments but JFIF's (with dpi: its
    density in dots per inch)."""
    im = Image.new("RGB", (7, 5))
    im.putdata([(37 * x % 256, 53 * y % 256, (x * 5 + y * 41) % 256) for y in range(5)
                for x in range(7)])
    b = io.BytesIO()
    im.save(b, "JPEG", quality=95, **({"dpi": dpi} if dpi else {}))
    return b.getvalue()


def segment(payload):
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def with_app1(jpeg, payloads):
    """jpeg with APP1 segments of payloads right after SOI (before JFIF's APP0)."""
    assert jpeg[:2] == b"\xff\xd8"
    return jpeg[:2] + b"".join(segment(p) for p in payloads) + jpeg[2:]


def tiff(entries, big=False, ifd1=None, tail=b"", first=8):
    """A TIFF block: header, IFD0 at `first` of entries (tag, type, count, 4 value
    bytes, already in the block's byte order), IFD1 after it (or none), then tail."""
    e = ">" if big else "<"
    n1 = 0 if ifd1 is None else first + 2 + 12 * len(entries) + 4
    out = (b"MM\x00\x2a" if big else b"II\x2a\x00") + struct.pack(e + "L", first)
    out += b"\x00" * (first - 8)
    out += struct.pack(e + "H", len(entries))
    for tag, typ, count, val in entries:
        out += struct.pack(e + "HHL", tag, typ, count) + val
    out += struct.pack(e + "L", n1)
    if ifd1 is not None:
        out += struct.pack(e + "H", len(ifd1))
        for tag, typ, count, val in ifd1:
            out += struct.pack(e + "HHL", tag, typ, count) + val
        out += struct.pack(e + "L", 0)
    return out + tail


def short(v, big=False):
    return struct.pack((">" if big else "<") + "HH", v, 0)


def exif(block):
    return b"Exif\x00\x00" + block


def cases():
    c = {}
    for o in range(1, 9):
        c["o%d" % o] = [exif(tiff([(274, 3, 1, short(o))]))]
    c["be6"] = [exif(tiff([(274, 3, 1, short(6, True))], big=True))]
    c["long3"] = [exif(tiff([(274, 4, 1, struct.pack("<L", 3))]))]
    c["sshort2"] = [exif(tiff([(274, 8, 1, struct.pack("<hH", 2, 0))]))]
    # RATIONAL: 8 bytes out of line, right after the IFD (8 + 2 + 12 + 4 = 26)
    c["rat6"] = [exif(tiff([(274, 5, 1, struct.pack("<L", 26))], tail=struct.pack("<LL", 12, 2)))]
    c["flt8"] = [exif(tiff([(274, 11, 1, struct.pack("<f", 8.0))]))]
    c["byte6"] = [exif(tiff([(274, 1, 1, b"\x06\x00\x00\x00")])),
                  XMP_NS + b'<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>']
    c["cnt2"] = [exif(tiff([(274, 3, 2, struct.pack("<HH", 5, 2))]))]
    c["dup"] = [exif(tiff([(274, 3, 1, short(1)), (274, 3, 1, short(6))]))]
    c["skip8"] = [exif(tiff([(274, 14, 1, short(3)), (274, 3, 1, short(8))]))]
    c["ifd1"] = [exif(tiff([(282, 3, 1, short(72))], ifd1=[(274, 3, 1, short(6))]))]
    c["nine"] = [exif(tiff([(274, 3, 1, short(9))]))]
    # the value (SHORT x 3, 6 bytes, out of line) at offset 26: past the first
    # segment's 26 bytes of TIFF, in the second segment's (Pillow appends it)
    c["split"] = [exif(tiff([(274, 3, 3, struct.pack("<L", 26))])),
                  exif(struct.pack("<HHH", 7, 0, 0))]
    # out-of-line data past the block: more bytes than the block holds, skipped;
    # fewer, but past its end, a truncated read that ends the directory
    c["big6"] = [exif(tiff([(270, 2, 400, struct.pack("<L", 30)), (274, 3, 1, short(6))]))]
    c["trunc"] = [exif(tiff([(270, 2, 8, struct.pack("<L", 34)), (274, 3, 1, short(6))]))]
    c["xmp6"] = [XMP_NS + b'<x:xmpmeta><rdf:Description tiff:Orientation="6"/></x:xmpmeta>']
    c["xmp3"] = [XMP_NS + b"<x:xmpmeta><tiff:Orientation>3</tiff:Orientation></x:xmpmeta>"]
    c["noor7"] = [exif(tiff([(282, 3, 1, short(72))])),
                  XMP_NS + b'<x:xmpmeta tiff:Orientation="7"/>']
    c["one6"] = [exif(tiff([(274, 3, 1, short(1))])), XMP_NS + b'<x tiff:Orientation="6"/>']
    c["badhdr"] = [exif(b"NOTATIFFHEADER\x00\x00" + short(6)), XMP_NS + b'<x tiff:Orientation="6"/>']
    c["badhdr-dpi"] = c["badhdr"]     # (on base_jpeg((72, 72)): Pillow raises)
    return c


def expect(data):
    im = Image.open(io.BytesIO(data))
    try:
        o = im.getexif().get(274)
        t = ImageOps.exif_transpose(im).convert("RGB")
        raises = False
    except Exception:           # (a block that is no TIFF: SyntaxError)
        o, raises = None, True
        t = Image.open(io.BytesIO(data)).convert("RGB")
    out = {"orientation": None if o is None else str(o), "size": list(t.size),
           "sha256": hashlib.sha256(t.tobytes()).hexdigest()}
    if raises:
        out["pil"] = "raises"
    return out


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: make-exif-fixtures.py OUTDIR [FUZZDIR]")
    out, fuzz = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None
    os.makedirs(out, exist_ok=True)
    jpeg, info = base_jpeg(), {}
    for name, payloads in cases().items():
        data = with_app1(base_jpeg((72, 72)) if name.endswith("-dpi") else jpeg, payloads)
        with open(os.path.join(out, name + ".jpg"), "wb") as f:
            f.write(data)
        info[name] = expect(data)
        print(" ", name, info[name])
        ex = [p for p in payloads if p.startswith(b"Exif\x00\x00")]
        if fuzz and ex:
            os.makedirs(fuzz, exist_ok=True)
            with open(os.path.join(fuzz, name + ".bin"), "wb") as f:
                f.write(ex[0] + b"".join(p[6:] for p in ex[1:]))
    with open(os.path.join(out, "expect.json"), "w") as f:
        json.dump({"pillow": Image.__version__, "images": info}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
