package pool

import "testing"

// BenchmarkParseTenThousandSlots parses serve's benchmark pool file.
//
//	go test ./handlers/pool -run '^$' -bench ParseTenThousandSlots -benchmem
func BenchmarkParseTenThousandSlots(b *testing.B) {
	data := tenThousandSlots()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("pool.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
