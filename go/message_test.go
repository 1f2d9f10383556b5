package podmux

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What the C library makes of each line of its seed corpus: the Go
// package must agree (accept, reject, or a protocol mismatch).
var cCorpusResults = map[string]string{
	"empty.line":           "bad",
	"error.line":           "ok",
	"escaped-key.line":     "ok",
	"hello-v2.line":        "protocol",
	"hello.line":           "ok",
	"not-json.line":        "bad",
	"plugin-failed.line":   "ok",
	"plugin.line":          "ok",
	"pods-add.line":        "ok",
	"pods-empty.line":      "ok",
	"pods-set.line":        "ok",
	"pods-unknown-op.line": "bad",
	"sources-ready.line":   "ok",
	"synced.line":          "ok",
	"unknown-type.line":    "ok",
}

func outcome(err error) string {
	var pv errProtocolVersion
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &pv):
		return "protocol"
	}
	return "bad"
}

func TestCCorpus(t *testing.T) {
	entries, err := os.ReadDir(cCorpus)
	if err != nil {
		t.Skipf("no C corpus at %s (the module outside the podmux tree): %v", cCorpus, err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(cCorpus, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		_, err = parseLine(b)
		want, known := cCorpusResults[e.Name()]
		if !known {
			want = outcome(err) // a newer seed: only that it does not panic
		}
		if got := outcome(err); got != want {
			t.Errorf("%s: %s (%v), the C library: %s", e.Name(), got, err, want)
		}
	}
}

// Values as the C library's parser takes them (src/util/json_parse.c):
// strict JSON, and its few limits.
func TestJSONValues(t *testing.T) {
	cases := []struct {
		value string
		ok    bool
	}{
		{`1`, true}, {`-0`, true}, {`0.5`, true}, {`1e5`, true}, {`1E+5`, true}, {`-1.5e-3`, true},
		{`01`, false}, {`1.`, false}, {`.5`, false}, {`1e`, false}, {`-`, false}, {`+1`, false},
		{`NaN`, false}, {`Infinity`, false}, {`0x10`, false},
		{`true`, true}, {`false`, true}, {`null`, true}, {`tru`, false}, {`nul`, false}, {`True`, false},
		{`"a"`, true}, {`"\"\\\/\b\f\n\r\t"`, true}, {`"\u00e9"`, true}, {`"\uD83D\uDE00"`, true},
		{`"\ud800"`, true}, {`"\udc00x"`, true}, {`"\ud800\ud800"`, true},
		{`"\x"`, false}, {`"\u12g4"`, false}, {`"a` + "\x01" + `"`, false}, {`"a` + "\n" + `"`, false},
		{`"` + "\xff\xfe" + `"`, true}, {`"é"`, true}, {`'a'`, false}, {`"a`, false},
		{`[]`, true}, {`[1,2]`, true}, {`[1,]`, false}, {`[,1]`, false}, {`[1 2]`, false},
		{`{}`, true}, {`{"a":1,"a":2}`, true}, {`{"a":1,}`, false}, {`{a:1}`, false}, {`{"a" 1}`, false},
		{`{"a":1 "b":2}`, false}, {` [ { "a" : [ ] } ] `, true},
		{strings.Repeat("[", 72) + strings.Repeat("]", 72), true},
		{strings.Repeat("[", 73) + strings.Repeat("]", 73), false},
		{strings.Repeat(`{"a":`, 72) + "1" + strings.Repeat("}", 72), true},
		{strings.Repeat(`{"a":`, 73) + "1" + strings.Repeat("}", 73), false},
		// The C parser reads a high surrogate's partner before the rest:
		// one whose escape the text's end cuts is an unterminated string.
		{`"\ud800\n"`, false},
		{`"\ud800\n" `, false},
		{`"\ud800\n"  `, true},
	}
	for _, c := range cases {
		line := `{"type":"x","seq":1,"v":` + c.value + `}`
		_, err := parseLine([]byte(line))
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.value, err, c.ok)
		}
	}
}

func TestDecodeStrings(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`"\u0041\n\t\"\\\/"`, "A\n\t\"\\/"},
		{`"\u00e9\uD83D\uDE00"`, "é😀"},
		{`"\ud800x"`, "\uFFFDx"},
		{`"\udc00"`, "\uFFFD"},
		{`"\ud800\u0041"`, "\uFFFDA"},
		{"\"a\xffb\"", "a\uFFFDb"},
		{"\"\xe2\x82\"", "\uFFFD\uFFFD"},
		{"\"\xed\xa0\x80\"", "\uFFFD\uFFFD\uFFFD"}, // a surrogate in UTF-8
		{`"ab\u0000cd"`, "ab"},                     // cut at NUL, as C strings are
		{`"é"`, "é"},
	}
	for _, c := range cases {
		w := walker{s: []byte(c.in)}
		a, b, escaped, err := w.str()
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if got := decode(w.s[a:b], escaped); got != c.want {
			t.Errorf("%s: %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseMessages(t *testing.T) {
	m, err := parseLine([]byte(` { "type" : "hello" , "protocol" : 1 , "mode" : "snapshot", "node": "n\u0031", "seq": 0 } `))
	if err != nil || m.typ != msgHello || m.mode != "snapshot" || m.node != "n1" || m.seq != 0 {
		t.Fatalf("%+v %v", m, err)
	}
	// A key spelled with escapes is the key; the last duplicate wins.
	m, err = parseLine([]byte(`{"ty\u0070e":"synced","seq":3,"seq":18446744073709551615,"resumed":true}`))
	if err != nil || m.typ != msgSynced || m.seq != 1<<64-1 || !m.resumed {
		t.Fatalf("%+v %v", m, err)
	}
	// The pods: their exact text; in a SET each its own source.
	p1 := `{ "metadata" : {"uid":"u\u0031","name":"n","namespace":"ns","annotations":{"kubernetes.io/config.source":"api"}}}`
	p2 := `{"metadata":{"uid":"u2","name":"n2"}}`
	m, err = parseLine([]byte(`{"type":"pods","seq":4,"op":"SET","source":"file","pods":[ ` + p1 + ` , ` + p2 + ` ]}`))
	if err != nil || len(m.pods) != 2 || m.op != OpSet {
		t.Fatalf("%+v %v", m, err)
	}
	if m.pods[0].JSON() != p1 || m.pods[0].UID() != "u1" || m.pods[0].Source() != "api" || m.pods[0].Namespace() != "ns" {
		t.Fatalf("pod 0: %q %q %q", m.pods[0].JSON(), m.pods[0].UID(), m.pods[0].Source())
	}
	if m.pods[1].JSON() != p2 || m.pods[1].Source() != "file" || m.pods[1].Namespace() != "" {
		t.Fatalf("pod 1: %q %q", m.pods[1].JSON(), m.pods[1].Source())
	}
	// Every identity field with an escape, in a pod that does not start
	// the line; a later duplicate replaces an earlier one, and one that
	// is not a string clears it.
	p3 := `{"metadata":{"uid":"u\u0033","name":"a","name":"n\/3","namespace":"n\u0073","namespace":7,` +
		`"namespace":"\u006es","annotations":{"kubernetes.io/config.source":"fil\u0065"}}}`
	m, err = parseLine([]byte(`{"type":"pods","seq":4,"op":"SET","source":"api","pods":[` + p2 + `,` + p3 + `]}`))
	if err != nil || len(m.pods) != 2 {
		t.Fatalf("%+v %v", m, err)
	}
	if q := m.pods[1]; q.JSON() != p3 || q.UID() != "u3" || q.Name() != "n/3" || q.Namespace() != "ns" || q.Source() != "file" {
		t.Fatalf("pod 3: %q %q %q %q %q", q.JSON(), q.UID(), q.Name(), q.Namespace(), q.Source())
	}
	if q := m.pods[0]; q.UID() != "u2" || q.Name() != "n2" || q.Namespace() != "" || q.Source() != "api" {
		t.Fatalf("pod 2: %q %q %q %q", q.UID(), q.Name(), q.Namespace(), q.Source())
	}
	// Outside a SET or "*", the message's source.
	m, err = parseLine([]byte(`{"type":"pods","seq":4,"op":"ADD","source":"file","pods":[` + p1 + `],"pods":[` + p1 + `]}`))
	if err != nil || len(m.pods) != 1 || m.pods[0].Source() != "file" {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = parseLine([]byte(`{"type":"pods","seq":4,"op":"ADD","source":"*","pods":[` + p1 + `]}`))
	if err != nil || m.pods[0].Source() != "api" {
		t.Fatalf("%+v %v", m, err)
	}
	// A pods message without pods is an empty one.
	m, err = parseLine([]byte(`{"type":"pods","seq":4,"op":"REMOVE","source":"file"}`))
	if err != nil || len(m.pods) != 0 {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = parseLine([]byte(`{"type":"plugin","seq":5,"op":"FAILED","plugin":{"socket":"/s","name":7},"error":"e"}`))
	if err != nil || m.plugin.Socket != "/s" || m.plugin.Name != "" || m.plugin.JSON != `{"socket":"/s","name":7}` ||
		m.errorText != "e" || m.pluginOp != "FAILED" {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = parseLine([]byte(`{"type":"error","seq":5,"reason":"SlowConsumer"}`))
	if err != nil || m.reason != "SlowConsumer" || m.text != "" {
		t.Fatalf("%+v %v", m, err)
	}
	m, err = parseLine([]byte(`{"type":"sources_ready","seq":5,"sources":[]}`))
	if err != nil || m.sources == nil || len(m.sources) != 0 {
		t.Fatalf("%+v %v", m, err)
	}
	// A hello of another protocol: told first, whatever else it lacks.
	for _, line := range []string{`{"type":"hello","protocol":2}`, `{"type":"hello","protocol":-1,"seq":"x"}`,
		`{"type":"hello","protocol":99999999999999999999}` + "\n"} {
		if _, err := parseLine([]byte(line)); outcome(err) != "bad" && outcome(err) != "protocol" {
			t.Fatalf("%s: %v", line, err)
		}
	}
	if _, err := parseLine([]byte(`{"type":"hello","protocol":2}`)); outcome(err) != "protocol" {
		t.Fatal(err)
	}
	if _, err := parseLine([]byte(`{"type":"hello","protocol":1.0,"seq":1}`)); outcome(err) != "bad" {
		t.Fatal(err)
	}
	if _, err := parseLine([]byte(`{"type":"hello","protocol":1}`)); outcome(err) != "bad" {
		t.Fatal(err)
	}
	// The reasons name the byte.
	_, err = parseLine([]byte(`{"type":"x","seq":1,"v":[1,}`))
	if err == nil || err.Error() != "byte 27: unexpected character" {
		t.Fatalf("%v", err)
	}
	_, err = parseLine([]byte(`{"type":"x","seq":1,"v":[1,`))
	if err == nil || err.Error() != "unexpected end of JSON input" {
		t.Fatalf("%v", err)
	}
}

// tests/fixtures/message-lines.json: each line taken or refused as
// malformed, as the C library and the Python module take it; "pods" and
// "plugin" count only in a message of their own type.
func TestMessageLinesFixture(t *testing.T) {
	b, err := os.ReadFile("../tests/fixtures/message-lines.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Cases []struct {
			Name, Line string
			OK         bool
		}
	}
	if err := json.Unmarshal(b, &f); err != nil || len(f.Cases) == 0 {
		t.Fatalf("the fixture: %v, %d cases", err, len(f.Cases))
	}
	for _, c := range f.Cases {
		m, err := parseLine([]byte(c.Line))
		if got := outcome(err); got != map[bool]string{true: "ok", false: "bad"}[c.OK] {
			t.Errorf("%s: %s (%v)", c.Name, got, err)
			continue
		}
		if err == nil && ((m.typ != msgPods && len(m.pods) != 0) || (m.typ != msgPlugin && m.plugin.JSON != "")) {
			t.Errorf("%s: a %v message holds pods or a plugin", c.Name, m.typ)
		}
	}
}
