package s3

import (
	"encoding/base64"
	"encoding/binary"
)

// Combining CRCs. A multipart upload of checksum type FULL_OBJECT keeps
// the CRC of its whole object, which the store makes of its parts' CRCs
// and sizes, without reading the object back (its parts are joined by
// the kernel: see uploads.join). For the CRCs that S3 combines so
// (CRC32, CRC32C, CRC64NVME: reflected, their register all ones before
// and after), the CRC of A then B is the CRC of A multiplied by x to the
// power of 8·len(B), modulo the CRC's polynomial, added (xor) to the CRC
// of B: the ones that A's conditioning leaves cancel those of B's.

// crcPoly is the reflected polynomial and the width in bits of each CRC
// that combines.
var crcPoly = map[string]struct {
	poly  uint64
	width uint
}{
	"crc32":     {0xedb88320, 32},
	"crc32c":    {0x82f63b78, 32},
	"crc64nvme": {0x9a6c9329ac4bc9b5, 64},
}

// gfMul multiplies a by b modulo the reflected polynomial poly of width
// bits, where the highest bit is x⁰.
func gfMul(a, b, poly uint64, width uint) uint64 {
	var p uint64
	for m := uint64(1) << (width - 1); m != 0 && a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// crcShift multiplies crc by x^(8·n) modulo poly: crc of a string, as
// if n bytes of zeros followed it without the CRC's conditioning.
func crcShift(crc uint64, n int64, poly uint64, width uint) uint64 {
	xn := uint64(1) << (width - 1)       // x⁰
	base := uint64(1) << (width - 1 - 8) // x⁸
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			xn = gfMul(xn, base, poly, width)
		}
		base = gfMul(base, base, poly, width)
	}
	return gfMul(xn, crc, poly, width)
}

// crcPart is one part's CRC, as its Sum gives it (big-endian), and size.
type crcPart struct {
	sum  []byte
	size int64
}

// combineCRC is the CRC (base64) of algo of the parts one after the
// other, or "" for an algorithm that does not combine.
func combineCRC(algo string, parts []crcPart) string {
	c, ok := crcPoly[algo]
	if !ok {
		return ""
	}
	var crc uint64
	for _, p := range parts {
		var v uint64
		if c.width == 32 {
			v = uint64(binary.BigEndian.Uint32(p.sum))
		} else {
			v = binary.BigEndian.Uint64(p.sum)
		}
		crc = crcShift(crc, p.size, c.poly, c.width) ^ v
	}
	out := binary.BigEndian.AppendUint64(nil, crc)
	return base64.StdEncoding.EncodeToString(out[8-c.width/8:])
}
