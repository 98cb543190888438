package transport

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkPipeline measures the RESP layer with a pipeline of depth 100 on one
// connection: reading, parsing, submitting to the (in-process) backend, and
// rendering. One op is one command.
func BenchmarkPipeline(b *testing.B) {
	for _, kind := range []string{"BF.ADD", "BF.EXISTS", "PING"} {
		b.Run(kind, func(b *testing.B) {
			ts := mustStartServer(b, Config{})
			c := dialRaw(b, ts.addr)
			var req strings.Builder
			for i := 0; i < 100; i++ {
				if kind == "PING" {
					req.WriteString(encode("PING"))
				} else {
					req.WriteString(encode(kind, "bench", fmt.Sprint("item-", i)))
				}
			}
			batch := req.String()
			b.ResetTimer()
			for done := 0; done < b.N; done += 100 {
				c.send(batch)
				for i := 0; i < 100; i++ {
					c.reply()
				}
			}
		})
	}
}

// BenchmarkParse measures parsing and validation alone.
func BenchmarkParse(b *testing.B) {
	s := mustNewParser(b, Config{})
	args := toArgs("BF.INSERT", "key", "CAPACITY", "1000", "ERROR", "0.001", "ITEMS", "a", "b", "c")
	c := &session{proto: 2, authed: true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := s.parse(c, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseExists: the read most clients send most, outside MULTI.
func BenchmarkParseExists(b *testing.B) {
	s := mustNewParser(b, Config{})
	args := toArgs("BF.EXISTS", "key", "item")
	c := &session{proto: 2, authed: true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := s.parse(c, args); err != nil {
			b.Fatal(err)
		}
	}
}
