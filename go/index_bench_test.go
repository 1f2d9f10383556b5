package podmux

import (
	"fmt"
	"strings"
	"testing"
)

// benchIndexClient is a client holding n pods, 100 to a namespace, as
// scripts/bench's client line holds them (tests/bench/bench_client.c):
// pods of some 1.4 KB, in one SET, since the live heap's size sets how
// often the collector runs.  Each pod's namespace is in a table of keys
// of their own (as that benchmark's nss[]), so a lookup does not start
// with cache misses on a pod picked at random.
func benchIndexClient(n int) (*Client, []string) {
	c := NewClient(Config{})
	var line strings.Builder
	pad := strings.Repeat("x", 1200)
	line.WriteString(`{"type":"pods","seq":1,"op":"SET","source":"file","pods":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			line.WriteByte(',')
		}
		fmt.Fprintf(&line, `{"metadata":{"name":"pod-%05d","namespace":"ns-%02d","uid":"uid-%05d",`+
			`"annotations":{"kubernetes.io/config.source":"file"}},"spec":{"pad":"%s"}}`, i, i/100, i, pad)
	}
	line.WriteString("]}")
	m, err := parseLine([]byte(line.String()))
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.st.applyPods(m)
	c.mu.Unlock()
	nss := make([]string, n)
	for i := range nss {
		nss[i] = fmt.Sprintf("ns-%02d", i/100)
	}
	return c, nss
}

// ByIndex on the built-in namespace index, 5,000 pods, 100 found: the
// figure scripts/bench compares with the C library's.  go test -bench
// ByIndex -benchmem -cpuprofile shows where its time goes.
func BenchmarkByIndex(b *testing.B) {
	c, nss := benchIndexClient(5000)
	if v, _ := c.ByIndex(IndexNamespace, nss[0]); len(v) != 100 {
		b.Fatalf("%d pods", len(v))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		if _, err := c.ByIndex(IndexNamespace, nss[(k*7919)%len(nss)]); err != nil {
			b.Fatal(err)
		}
	}
}

// AppendByIndex into a slice reused: the same lookup without the
// allocation (scripts/bench's extra row).
func BenchmarkAppendByIndex(b *testing.B) {
	c, nss := benchIndexClient(5000)
	buf, _ := c.AppendByIndex(nil, IndexNamespace, nss[0])
	b.ReportAllocs()
	b.ResetTimer()
	for k := 0; k < b.N; k++ {
		var err error
		if buf, err = c.AppendByIndex(buf[:0], IndexNamespace, nss[(k*7919)%len(nss)]); err != nil {
			b.Fatal(err)
		}
	}
}
