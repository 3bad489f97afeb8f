#!/usr/bin/python3
"""tests/svg_check.py - checks of the chart `ulpfs stats --svg` writes, for
tests/cli_svg.sh.

  svg_check.py chart SVG STATS_JSON [--zstd19]
      SVG parses as XML (an SVG root); it has one bar per series and
      checkpoint of STATS_JSON's by_checkpoint, in that order, with the
      byte counts of the figures in each bar's title (raw, stored, and
      zstd -19 exactly when --zstd19 is given), bars as high as their
      figures, a legend, both axis titles, and a label per checkpoint
      that is its name (markup escaped, non-UTF-8 bytes and control
      characters as U+FFFD).  Prints the checkpoint names.
  svg_check.py png PNG [--colour RRGGBB]...
      PNG (8-bit RGB or RGBA, as chromium writes) is not blank: at least
      2% of its pixels are not white, and each --colour is among them.

Exits 1 with the reason on the first failure.
"""

import json
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

NS = "{http://www.w3.org/2000/svg}"
SERIES = [("logical", "#9e9e9e"), ("stored", "#1f77b4"), ("zstd19", "#ff7f0e")]


def fail(msg):
    sys.exit("svg_check: " + msg)


def expected_label(name):
    """What the chart shows for name: what XML cannot hold becomes U+FFFD."""
    b = name.encode("utf-8", "surrogateescape")
    s = b.decode("utf-8", "replace")
    return "".join("\ufffd" if (ord(c) < 0x20 and c not in "\t\n\r") or c in "\ufffe\uffff"
                   else c for c in s)


def check_chart(svg, stats_path, z19):
    root = ET.parse(svg).getroot()
    if root.tag != NS + "svg":
        fail("%s: root element is %s, not svg" % (svg, root.tag))
    with open(stats_path, encoding="utf-8", errors="surrogateescape") as f:
        stats = json.load(f)
    cks = stats["by_checkpoint"]
    series = SERIES if z19 else SERIES[:2]
    rects = root.findall(NS + "rect")
    texts = ["".join(t.itertext()) for t in root.iter(NS + "text")]
    for key, colour in SERIES:
        bars = [r for r in rects if r.get("fill") == colour and r.find(NS + "title") is not None]
        want = len(cks) if (key, colour) in series else 0
        if len(bars) != want:
            fail("%d %s bars, expected %d" % (len(bars), key, want))
        if not want:
            continue
        for ck, bar in zip(cks, bars):
            title = bar.find(NS + "title").text
            if "(%d bytes)" % ck[key] not in title:
                fail("bar %r: expected %d bytes for %s" % (title, ck[key], ck["name"]))
            if not title.startswith(expected_label(ck["name"]) + ":"):
                fail("bar %r is not for %r" % (title, ck["name"]))
        # heights proportional to the figures (the y axis is linear)
        big = max(range(len(cks)), key=lambda i: cks[i][key], default=None)
        if big is not None and cks[big][key]:
            scale = float(bars[big].get("height")) / cks[big][key]
            for ck, bar in zip(cks, bars):
                if abs(float(bar.get("height")) - scale * ck[key]) > 0.02:
                    fail("bar of %s: height %s, not proportional to %d"
                         % (ck["name"], bar.get("height"), ck[key]))
    for want in ["raw files", "stored by ulpfs", "checkpoint, in the order written"] + \
            (["zstd -19 of each file"] if z19 else []):
        if want not in texts:
            fail("no text %r in the chart" % want)
    if not any(t.startswith("bytes per checkpoint (") for t in texts):
        fail("no y axis title")
    if not z19 and "zstd -19 of each file" in texts:
        fail("a zstd -19 legend without --zstd19")
    labels = [expected_label(ck["name"]) for ck in cks]
    for lab in labels:
        if len(lab) > 40:
            lab = lab[:39] + "\u2026"
        if lab not in texts:
            fail("no axis label %r" % lab)
    print("\n".join(ascii(ck["name"]) for ck in cks))


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail("%s is not a PNG" % path)
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        fail("%s: PNG depth %d colour type %d interlace %d not handled" %
             (path, depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ft, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ft == 1:
                line[i] = (line[i] + a) & 255
            elif ft == 2:
                line[i] = (line[i] + b) & 255
            elif ft == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_png(path, colours):
    w, h, bpp, rows = read_png(path)
    seen, inked = set(), 0
    for row in rows:
        for x in range(0, w * bpp, bpp):
            px = row[x:x + 3]
            if px != b"\xff\xff\xff":
                inked += 1
                seen.add(px)
    if inked < 0.02 * w * h:
        fail("%s (%dx%d) is blank: %d pixels not white" % (path, w, h, inked))
    for c in colours:
        if bytes.fromhex(c) not in seen:
            fail("%s: no pixel of colour #%s" % (path, c))
    print("%dx%d, %.1f%% of the pixels not white, %d colours" %
          (w, h, 100.0 * inked / (w * h), len(seen)))


def main():
    args = sys.argv[1:]
    if len(args) >= 3 and args[0] == "chart":
        check_chart(args[1], args[2], "--zstd19" in args[3:])
    elif len(args) >= 2 and args[0] == "png":
        cols = [args[i + 1] for i in range(2, len(args) - 1) if args[i] == "--colour"]
        check_png(args[1], cols)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
