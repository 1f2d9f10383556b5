package podmux

// Go native fuzzing of what comes from the daemon, seeded from the C
// library's corpus (tests/fuzz/corpus/client_msg/ of the podmux tree, read
// where it lies) and from the lines of the tests.  `go test` runs the
// seeds as ordinary tests; `go test -fuzz FuzzParseLine` fuzzes.
//
// Checked: no input panics; an error is a badLine with a reason or a
// protocol mismatch; an accepted line is valid JSON (encoding/json
// agrees), and each of its pods has a UID and a name and is one JSON
// object; applied to a cache (twice), the cache stays sorted and its UID
// map finds every pod.  A stream of lines through the client's protocol
// state: the updates handed on, applied in order, give the cache.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cCorpus is the C library's seed corpus, relative to this package.
const cCorpus = "../tests/fuzz/corpus/client_msg"

func addCorpus(f *testing.F) {
	entries, err := os.ReadDir(cCorpus)
	if err != nil {
		// The module copied out of the podmux tree: only its own seeds.
		f.Logf("no C corpus at %s: %v", cCorpus, err)
		return
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(cCorpus, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

var seedLines = []string{
	`{"type":"hello","protocol":1,"mode":"incremental","node":"n1","seq":5}`,
	`{"type":"pods","seq":6,"op":"SET","source":"*","pods":[` + podText("b", "d", "b", "file", 1) + "," +
		podText("a", "d", "a", "api", 1) + "," + podText("a", "d", "a", "api", 2) + `]}`,
	`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"\u0000x","name":"x"}}]}`,
	`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":"\ud800\n"}`,
	`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":` + strings.Repeat("[", 72) + strings.Repeat("]", 72) + `}`,
	`{"type":"pods","seq":18446744073709551615,"op":"REMOVE","source":"file","pods":[]}`,
	`{"type":"hello","protocol":-9223372036854775808,"seq":1}`,
	`{"type":"hello","protocol":18446744073709551615,"seq":1}`,
	`{"type":"plugin","seq":20,"op":"DEREGISTERED","plugin":{"socket":"/s","socket":1}}`,
	`{"type":"sources_ready","seq":20,"sources":["a\u00e9\ud83d\ude00","b"]}`,
	"{\"type\":\"pods\",\"seq\":20,\"op\":\"ADD\",\"source\":\"file\",\"pods\":[{\"metadata\":{\"uid\":\"\xff\xfe\",\"name\":\"\xc3\"}}]}",
}

func FuzzParseLine(f *testing.F) {
	addCorpus(f)
	for _, s := range seedLines {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseLine(line)
		if err != nil {
			var bad badLine
			var pv errProtocolVersion
			switch {
			case errors.As(err, &bad):
				if bad == "" {
					t.Fatal("an error without a reason")
				}
			case errors.As(err, &pv):
				if pv.protocol == Protocol {
					t.Fatal("a protocol mismatch with our own protocol")
				}
			default:
				t.Fatalf("an error of type %T: %v", err, err)
			}
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted a line encoding/json rejects: %q", line)
		}
		for _, p := range m.pods {
			text := bytes.TrimSpace([]byte(p.JSON()))
			if p.UID() == "" || !json.Valid(text) || text[0] != '{' {
				t.Fatalf("a bad pod accepted: %q (uid %q)", p.JSON(), p.UID())
			}
			var v map[string]any
			if err := p.Decode(&v); err != nil {
				t.Fatalf("Decode: %v", err)
			}
		}
		st := newStore()
		for k := 0; k < 2 && m.typ == msgPods; k++ {
			st.applyPods(m)
		}
		if m.typ == msgPlugin {
			st.applyPlugin(m)
		}
		checkStore(t, st)
	})
}

// checkStore: sorted, one pod per source and UID, and the UID map finds
// every pod and nothing else.
func checkStore(t *testing.T, st *store) {
	t.Helper()
	n := 0
	keys := map[podKey]bool{}
	for i, p := range st.pods {
		if i > 0 && comparePods(st.pods[i-1], p) >= 0 {
			t.Fatalf("the cache is not sorted at %d", i)
		}
		if keys[podKey{p.source, p.uid}] {
			t.Fatalf("two pods of source %q and uid %q", p.source, p.uid)
		}
		keys[podKey{p.source, p.uid}] = true
		if st.get(p.source, p.uid) != p {
			t.Fatalf("%s not found by its source and uid", Pod{p})
		}
		if q := st.podByUID(p.uid); q == nil || q.uid != p.uid {
			t.Fatalf("uid %q not found", p.uid)
		}
	}
	for uid, slot := range st.byUID {
		for _, p := range append([]*pod{slot.first}, slot.more...) {
			if p.uid != uid {
				t.Fatalf("pod %q under uid %q", p.uid, uid)
			}
			if _, found := st.find(p); !found {
				t.Fatalf("the uid map holds a pod the cache does not: %s", Pod{p})
			}
			n++
		}
	}
	if n != len(st.pods) {
		t.Fatalf("the uid map holds %d pods, the cache %d", n, len(st.pods))
	}
	for i := 1; i < len(st.plugins); i++ {
		if st.plugins[i-1].Socket >= st.plugins[i].Socket {
			t.Fatal("plugins not sorted")
		}
	}
}

// FuzzStream: lines through the client's protocol state; a line that
// ends the connection starts another (as a reconnection would).  The
// updates handed on, applied in order, give the cache.
func FuzzStream(f *testing.F) {
	hello := `{"type":"hello","protocol":1,"seq":5}`
	f.Add([]byte(hello + "\n" + `{"type":"pods","seq":6,"op":"ADD","source":"file","pods":[` +
		podText("a", "d", "a", "file", 1) + `]}` + "\n" + `{"type":"synced","seq":7}` + "\n" +
		`{"type":"pods","seq":8,"op":"UPDATE","source":"file","pods":[` + podText("a", "d", "a2", "file", 2) + `]}` + "\n" +
		hello + "\n" + `{"type":"pods","seq":9,"op":"SET","source":"*","pods":[` + podText("b", "d", "b", "api", 1) + `]}` +
		"\n" + `{"type":"synced","seq":10}` + "\n" + `{"type":"pods","seq":11,"op":"REMOVE","source":"api","pods":[` +
		podText("b", "d", "b", "api", 1) + `]}`))
	f.Add([]byte(hello + "\n" + `{"type":"synced","seq":7}` + "\n" + `{"type":"error","seq":8,"reason":"SlowConsumer"}` +
		"\n" + hello + "\n" + `{"type":"pods","seq":8,"op":"ADD","source":"file","pods":[` + podText("a", "d", "a", "file", 1) +
		`]}` + "\n" + `{"type":"plugin","seq":9,"op":"REGISTERED","plugin":{"socket":"/s"}}` + "\n" +
		`{"type":"synced","seq":10,"resumed":true}`))
	// A restart whose api source delivers late: its pods held over.
	pods := func(seq int, op, src string, texts ...string) string {
		return fmt.Sprintf(`{"type":"pods","seq":%d,"op":"%s","source":"%s","pods":[%s]}`, seq, op, src,
			strings.Join(texts, ",")) + "\n"
	}
	f.Add([]byte(hello + "\n" + pods(6, "ADD", "file", podText("a", "d", "a", "file", 1)) +
		pods(7, "ADD", "api", podText("c", "d", "c", "api", 1), podText("d", "d", "d", "api", 1)) +
		`{"type":"synced","seq":8}` + "\n" + `{"type":"error","seq":9,"reason":"ShuttingDown"}` + "\n" +
		`{"type":"hello","protocol":1,"seq":100}` + "\n" + pods(101, "ADD", "file", podText("a", "d", "a", "file", 1)) +
		`{"type":"synced","seq":102}` + "\n" +
		pods(103, "ADD", "api", podText("c", "d", "c", "api", 2), podText("e", "d", "e", "api", 1)) +
		`{"type":"sources_ready","seq":104,"sources":["api","file"]}` + "\n" +
		pods(105, "SET", "api", podText("a", "d", "a", "file", 1))))
	f.Fuzz(func(t *testing.T, stream []byte) {
		model := map[string]string{}
		key := func(p Pod) string { return p.Source() + "/" + p.UID() }
		c := NewClient(Config{Path: "/fuzz", Handlers: Handlers{Pods: func(u Update) {
			if u.Op == OpSet {
				model = map[string]string{}
			}
			for _, p := range u.Pods {
				if u.Op == OpRemove {
					delete(model, key(p))
				} else {
					model[key(p)] = p.JSON()
				}
			}
		}}})
		c.ctx = context.Background()
		cs := &conn{}
		for _, line := range bytes.Split(stream, []byte("\n")) {
			if e := c.dispatch(cs, line); e != nil {
				if e.Message == "" {
					t.Fatal("an error without a message")
				}
				cs = &conn{}
			}
		}
		checkStore(t, c.st)
		if len(model) != len(c.st.pods) {
			t.Fatalf("the updates give %d pods, the cache holds %d", len(model), len(c.st.pods))
		}
		for _, p := range c.st.pods {
			if text, ok := model[key(Pod{p})]; !ok || !samePod(text, p.text) {
				t.Fatalf("cache pod %s is not what the updates gave", Pod{p})
			}
		}
	})
}
