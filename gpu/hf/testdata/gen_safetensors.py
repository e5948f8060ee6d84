"""gen_safetensors.py writes reference.safetensors by following the
safetensors format description directly (8-byte little-endian header
length, JSON header padded with spaces to 8 bytes, little-endian data),
independently of swerl's writer. Run: python3 gen_safetensors.py"""
import json
import struct

tensors = [
    ("a", "F32", [2, 3], struct.pack("<6f", 0.0, 0.5, 1.0, 1.5, -2.0, 3.25)),
    # IEEE half bit patterns: 1.0, -2.0, 0.5, 65504 (max), 2**-24 (min subnormal)
    ("b", "F16", [5], struct.pack("<5H", 0x3C00, 0xC000, 0x3800, 0x7BFF, 0x0001)),
    # bfloat16 bit patterns: 1.0, -3.0, 1/3 rounded (0x3EAB)
    ("c", "BF16", [3], struct.pack("<3H", 0x3F80, 0xC040, 0x3EAB)),
    ("scalar", "F32", [], struct.pack("<f", 7.0)),
]
header = {"__metadata__": {"format": "pt", "source": "gen_safetensors.py"}}
off = 0
for name, dt, shape, data in tensors:
    header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
    off += len(data)
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * (-len(h) % 8)
with open("reference.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)))
    f.write(h)
    for _, _, _, data in tensors:
        f.write(data)
