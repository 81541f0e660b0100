package s3

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

// TestCombineCRC: the CRC that combineCRC makes of parts' CRCs and sizes
// is the CRC of the parts one after the other, for each CRC that S3
// combines, over random splits of random data (empty parts included).
func TestCombineCRC(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	for algo := range crcPoly {
		for trial := 0; trial < 50; trial++ {
			n := r.IntN(len(data) + 1)
			var parts []crcPart
			for at := 0; at < n; {
				size := min(r.IntN(n/3+2), n-at)
				h := checksums[algo]()
				h.Write(data[at : at+size])
				parts = append(parts, crcPart{sum: h.Sum(nil), size: int64(size)})
				at += size
			}
			whole := checksums[algo]()
			whole.Write(data[:n])
			want := base64.StdEncoding.EncodeToString(whole.Sum(nil))
			if n == 0 {
				parts = []crcPart{{sum: whole.Sum(nil)}}
			}
			if got := combineCRC(algo, parts); got != want {
				t.Fatalf("%s of %d bytes in %d parts: combined %s, want %s", algo, n, len(parts), got, want)
			}
		}
	}
	if got := combineCRC("sha256", nil); got != "" {
		t.Fatalf("sha256 combined to %q, want none", got)
	}
}
