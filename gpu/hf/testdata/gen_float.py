"""gen_float.py writes float_golden.json: float32 bit patterns with their
IEEE half (Python's struct 'e', round half to even) and bfloat16 (exact
rational arithmetic with fractions.Fraction, round half to even) roundings.
NaNs are left out. Run: python3 gen_float.py > float_golden.json"""
import json
import struct
from fractions import Fraction

def f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]

def half_bits(x):
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00

def bf16_value(h):
    # The value of bf16 pattern h (sign dropped) as a Fraction; 0x7f80 is
    # treated as 2**128, the next step past the largest finite value.
    h &= 0x7FFF
    if h == 0x7F80:
        return Fraction(2) ** 128
    return Fraction(f32(h << 16))

def bf16_bits(bits):
    sign = bits & 0x80000000
    mag = bits & 0x7FFFFFFF
    if mag == 0x7F800000:
        return (sign >> 16) | 0x7F80
    x = Fraction(f32(mag))
    lo = mag >> 16
    hi = lo + 1
    dlo = x - bf16_value(lo)
    dhi = bf16_value(hi) - x
    if dlo < dhi or (dlo == dhi and lo % 2 == 0):
        r = lo
    else:
        r = hi
    return (sign >> 16) | r

inputs = [0, 0x80000000, 0x3F800000, 0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF,
          0x7F800000, 0xFF800000, 0x00000001, 0x807FFFFF, 0x477FE000,
          0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001, 0x387FC000,
          0x38800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x7F7F8000,
          0x7F7F7FFF, 0x3DCCCCCD, 0x40490FDB]
seed = 12345
for _ in range(3000):
    seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    b = seed >> 32
    if (b >> 23) & 0xFF == 0xFF and b & 0x7FFFFF:
        continue
    inputs.append(b)
# Values in the half range are the interesting ones for F16.
for i in range(2000):
    seed = (seed * 6364136223846793005 + 1442695040888963407) % (1 << 64)
    e = 100 + (seed >> 40) % 45
    inputs.append(((seed >> 63) << 31) | (e << 23) | ((seed >> 8) & 0x7FFFFF))
rows = [[b, half_bits(f32(b)), bf16_bits(b)] for b in inputs]
print(json.dumps(rows))
