package numbering

import (
	"testing"
)

// BenchmarkClassify measures the hot path: the same few parties seen again and again (answered
// from the cache), and a stream of distinct numbers the cache cannot hold (parsed every time).
func BenchmarkClassify(b *testing.B) {
	inputs := []struct{ text, name string }{
		{"sip:+12125550123@carrier.example;user=phone", "Jane Doe"},
		{"sip:101@10.0.0.20", ""},
		{"+15551230100", ""},
		{"sip:anonymous@anonymous.invalid", "Anonymous"},
	}
	b.Run("cached", func(b *testing.B) {
		p := usPlan(b)
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			in := inputs[i%len(inputs)]
			p.Classify(in.text, in.name)
			i++
		}
	})
	b.Run("distinct", func(b *testing.B) {
		p := usPlan(b)
		const n = 2 * cacheEntries
		texts := make([]string, n)
		for i := range texts {
			texts[i] = "sip:+1212555" + pad4(i%10000) + "@carrier.example"
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p.Classify(texts[i%n], "")
			i++
		}
	})
}

func pad4(i int) string {
	s := itoa(i)
	for len(s) < 4 {
		s = "0" + s
	}
	return s
}
