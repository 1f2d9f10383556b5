package podmux

// The client against a scripted daemon (fake_test.go): every corner of
// protocol 1 a consumer meets (doc/protocol.md), the same scenarios as
// the C library's tests/unit/test_client.c.  Each test checks what the
// handlers saw, record by record, and that those records applied in order
// give the cache.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// begin connects and gives the state: file a, b; api c; then synced at
// 10.
func begin(t *testing.T, f *fake) {
	f.accept()
	f.hello(5)
	f.pods(6, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "kube-system", "beta", "file", 1))
	f.pods(7, "ADD", "api", podText("c", "default", "gamma", "api", 1))
	f.synced(10, false)
}

func TestFullState(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	if x.c.HasSynced() {
		t.Fatal("synced before any connection")
	}
	begin(t, f)
	if f.first != "{}" {
		t.Fatalf("first line %q", f.first)
	}
	// Held until synced, then given as the difference from the empty
	// cache: per source (sorted), ADD.
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	if !x.c.HasSynced() {
		t.Fatal("not synced")
	}
	if p, ok := x.c.ResumePoint(); !ok || p != 10 {
		t.Fatalf("resume point %d %v", p, ok)
	}
	want := "file/a=" + podText("a", "default", "alpha", "file", 1) + "\n" +
		"api/c=" + podText("c", "default", "gamma", "api", 1) + "\n" +
		"file/b=" + podText("b", "kube-system", "beta", "file", 1) + "\n"
	if got := dump(x.c); got != want {
		t.Fatalf("cache:\n%s\nwant:\n%s", got, want)
	}
	if p, ok := x.c.PodByUID("b"); !ok || p.Name() != "beta" || p.Namespace() != "kube-system" {
		t.Fatalf("by uid: %v %v", p, ok)
	}
	if p, ok := x.c.PodByName("default", "gamma"); !ok || p.UID() != "c" || p.Source() != "api" {
		t.Fatalf("by name: %v %v", p, ok)
	}
	if _, ok := x.c.PodByUID("zz"); ok {
		t.Fatal("found uid zz")
	}
	if _, ok := x.c.PodByName("default", "zz"); ok {
		t.Fatal("found default/zz")
	}
	if got := x.c.PodsByNamespace("default"); len(got) != 2 || got[0].UID() != "a" || got[1].UID() != "c" {
		t.Fatalf("by namespace: %v", got)
	}
	if got := x.c.PodsByNamespace("nope"); len(got) != 0 {
		t.Fatalf("by namespace nope: %v", got)
	}
	if x.c.Len() != 3 {
		t.Fatalf("len %d", x.c.Len())
	}
	var v struct {
		Spec struct{ Gen int } `json:"spec"`
	}
	p, _ := x.c.PodByUID("a")
	if err := p.Decode(&v); err != nil || v.Spec.Gen != 1 {
		t.Fatalf("decode: %v %+v", err, v)
	}
	x.r.checkModel(t, x.c)
	x.r.none(t)
}

func TestLiveOpsAndSeqGaps(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	kept, _ := x.c.PodByUID("a")
	// Numbers jump (other consumers' messages take numbers too).
	f.pods(20, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	f.pods(57, "REMOVE", "file", podText("b", "kube-system", "beta", "file", 1))
	f.pods(58, "DELETE", "api", podText("c", "default", "gamma", "api", 2))
	f.pods(90, "RECONCILE", "api", podText("c", "default", "gamma", "api", 3))
	f.pods(1000, "ADD", "http", podText("d", "web", "delta", "http", 1))
	f.send(`{"type":"sources_ready","seq":1001,"sources":["api","file","http"]}`)
	// The same list again tells nothing new.
	f.send(`{"type":"sources_ready","seq":1002,"sources":["api","file","http"]}`)
	f.barrier(x.r, 1003)
	x.r.expect(t, "pods UPDATE file a", "pods REMOVE file b", "pods DELETE api c", "pods RECONCILE api c",
		"pods ADD http d", "ready api file http")
	x.r.none(t)
	waitFor(t, "the resume point at the barrier's second message", func() bool {
		p, _ := x.c.ResumePoint()
		return p == 1004
	})
	if x.c.Len() != 3 {
		t.Fatalf("len %d", x.c.Len())
	}
	if _, ok := x.c.PodByUID("b"); ok {
		t.Fatal("b still there")
	}
	if s, ok := x.c.SourcesReady(); !ok || strings.Join(s, ",") != "api,file,http" {
		t.Fatalf("sources ready %v %v", s, ok)
	}
	// A pod kept by the application outlives its replacement.
	if !strings.Contains(kept.JSON(), `"gen":1`) {
		t.Fatal(kept.JSON())
	}
	if p, _ := x.c.PodByUID("a"); !strings.Contains(p.JSON(), `"gen":2`) {
		t.Fatal(p.JSON())
	}
	x.r.checkModel(t, x.c)
}

func TestResumeReplay(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	f.pods(20, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state", "pods UPDATE file a")
	// The daemon cuts us.
	f.close()
	x.r.expect(t, "error closed", "reconnect after 20")
	if !errors.Is(x.r.lastErr(), ErrClosed) || !errors.Is(x.r.lastErr(), syscall.ECONNRESET) {
		t.Fatalf("error %v", x.r.lastErr())
	}
	f.accept()
	if f.first != `{"resume_after":20}` {
		t.Fatalf("first line %q", f.first)
	}
	f.hello(40)
	// The replay: old numbers, before hello's.
	f.pods(21, "ADD", "file", podText("e", "default", "eps", "file", 1))
	f.pods(25, "UPDATE", "file", podText("a", "default", "alpha", "file", 3))
	f.send(`{"type":"plugin","seq":26,"op":"FAILED","plugin":{"socket":"/p/x.sock","type":"CSIPlugin","name":"x"},"error":"bad"}`)
	// Nothing is applied before synced.
	f.barrier(x.r, 27)
	x.r.none(t)
	if p, _ := x.c.PodByUID("a"); !strings.Contains(p.JSON(), `"gen":2`) {
		t.Fatal("applied before synced")
	}
	f.synced(41, true)
	x.r.expect(t, "pods ADD file e", "pods UPDATE file a", "plugin FAILED /p/x.sock error=bad", "synced resumed")
	if p, _ := x.c.ResumePoint(); p != 41 {
		t.Fatalf("resume point %d", p)
	}
	x.r.checkModel(t, x.c)
}

func TestFailedResumeFullState(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	f.send(`{"type":"plugin","seq":11,"op":"REGISTERED","plugin":{"socket":"/p/a.sock","type":"CSIPlugin","name":"a"}}`)
	f.send(`{"type":"plugin","seq":12,"op":"REGISTERED","plugin":{"socket":"/p/b.sock","type":"CSIPlugin","name":"b"}}`)
	f.send(`{"type":"error","seq":13,"reason":"SlowConsumer","message":"too slow"}`)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state", "plugin REGISTERED /p/a.sock",
		"plugin REGISTERED /p/b.sock", "error server SlowConsumer", "reconnect after 12")
	e := x.r.lastErr()
	if !errors.Is(e, ErrSlowConsumer) || !errors.Is(e, ErrServer) || !errors.Is(e, syscall.ENOBUFS) || e.Fatal {
		t.Fatalf("error %+v", e)
	}
	f.accept()
	if f.first != `{"resume_after":12}` {
		t.Fatalf("first line %q", f.first)
	}
	// 12 is no longer in the history: the full state.  a changed, b
	// gone, c the same, d new; plugin a the same, b gone, c new.
	f.hello(500)
	f.pods(501, "ADD", "api", podText("c", "default", "gamma", "api", 1))
	f.pods(502, "ADD", "file", podText("a", "default", "alpha", "file", 9), podText("d", "default", "delta", "file", 1))
	f.send(`{"type":"plugin","seq":503,"op":"REGISTERED","plugin":{"socket":"/p/a.sock","type":"CSIPlugin","name":"a"}}`)
	f.send(`{"type":"plugin","seq":504,"op":"REGISTERED","plugin":{"socket":"/p/c.sock","type":"DevicePlugin","name":"c"}}`)
	f.synced(505, false)
	f.send(`{"type":"sources_ready","seq":506,"sources":["api","file"]}`)
	x.r.expect(t, "pods REMOVE file resync b", "pods ADD file resync d", "pods UPDATE file resync a",
		"plugin DEREGISTERED /p/b.sock resync", "plugin REGISTERED /p/c.sock resync", "synced state",
		"ready api file")
	x.r.checkModel(t, x.c)
	pl := x.c.Plugins()
	if len(pl) != 2 || pl[0].Socket != "/p/a.sock" || pl[1].Socket != "/p/c.sock" || pl[1].Type != "DevicePlugin" ||
		pl[1].Name != "c" || !strings.HasPrefix(pl[1].JSON, `{"socket":"/p/c.sock"`) {
		t.Fatalf("plugins %+v", pl)
	}
}

// seenPod is a pod as the daemon writes it, with config.seen and other
// annotations.
func seenPod(uid, name, seen string, gen int, other string) string {
	ann := `"kubernetes.io/config.source":"file"`
	if seen != "" {
		ann += `,"kubernetes.io/config.seen":"` + seen + `"`
	}
	if other != "" {
		ann += "," + other
	}
	return fmt.Sprintf(`{"metadata":{"name":"%s","namespace":"default","uid":"%s","annotations":{%s}},"spec":{"gen":%d}}`,
		name, uid, ann, gen)
}

// A resync after a daemon restart: a pod whose only difference is its
// config.seen stamp is no change (the cache takes its new text); any
// other difference is.
func TestResyncIgnoresConfigSeen(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.hello(5)
	f.pods(6, "ADD", "file",
		seenPod("a", "a", "2026-01-01T00:00:00Z", 1, ""),
		seenPod("b", "b", "2026-01-01T00:00:00Z", 1, ""),
		seenPod("c", "c", "2026-01-01T00:00:00Z", 1, `"x":"1"`),
		seenPod("d", "d", "2026-01-01T00:00:00Z", 1, ""),
		`{"metadata":{"name":"e","namespace":"default","uid":"e","annotations":{"kubernetes.io/config.seen":"t1"}},"spec":{}}`,
		`{"metadata":{"name":"g","namespace":"default","uid":"g","annotations":{"kubernetes.io/config.seen":"t1"}},"spec":{}}`)
	f.synced(7, false)
	x.r.expect(t, "pods ADD file a b c d e g", "synced state")
	f.close()
	x.r.expect(t, "error closed", "reconnect after 7")
	f.accept()
	f.hello(9000)
	f.pods(9001, "ADD", "file",
		seenPod("a", "a", "2026-02-02T00:00:00.5Z", 1, ""),        // seen only: no change
		seenPod("b", "b", "2026-02-02T00:00:00.5Z", 2, ""),        // changed
		seenPod("c", "c", "2026-02-02T00:00:00.5Z", 1, `"x":"2"`), // another annotation changed
		seenPod("d", "d", "", 1, ""),                              // seen gone: the same
		// annotations left empty count as absent
		`{"metadata":{"name":"e","namespace":"default","uid":"e"},"spec":{}}`,
		// member order and white space do not count either
		`{"spec":{}, "metadata":{"uid":"g","annotations":{"kubernetes.io/config.seen":"t2"},"namespace":"default","name":"g"}}`)
	f.synced(9002, false)
	x.r.expect(t, "pods UPDATE file resync b c", "synced state")
	// The cache holds the new texts all the same.
	if p, _ := x.c.PodByUID("a"); !strings.Contains(p.JSON(), "2026-02-02") {
		t.Fatalf("cache kept the old text: %s", p.JSON())
	}
	x.r.checkModel(t, x.c)
}

// resyncCase is one pair of tests/fixtures/resync-diff.json: the texts
// of one pod before and after a daemon restart, and whether the resync
// diff tells it as changed (doc/protocol.md, "Which pods changed").
type resyncCase struct {
	Name, Before, After string
	Changed             bool
}

func resyncCases(t *testing.T) []resyncCase {
	t.Helper()
	b, err := os.ReadFile("../tests/fixtures/resync-diff.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []resyncCase }
	if err := json.Unmarshal(b, &f); err != nil || len(f.Cases) == 0 {
		t.Fatalf("the fixture: %v, %d cases", err, len(f.Cases))
	}
	return f.Cases
}

// The rule by itself, both ways round, on the fixture the C library and
// the Python module read too; and on texts that are not JSON.
func TestSamePod(t *testing.T) {
	for _, c := range resyncCases(t) {
		if samePod(c.Before, c.After) == c.Changed || samePod(c.After, c.Before) == c.Changed {
			t.Errorf("case %s: samePod says %v", c.Name, !c.Changed)
		}
		if !samePod(c.Before, c.Before) {
			t.Errorf("case %s: a text is not the same as itself", c.Name)
		}
	}
	if samePod(`not json`, `not json!`) || samePod(`{}`, `{`) {
		t.Error("a text that is not JSON is the same")
	}
	// Not objects at all: nothing compared, the same.
	if !samePod(`[]`, `1`) {
		t.Error("[] and 1 differ")
	}
}

// The full state after a daemon restart is compared with the cache as the
// merger compares: on the fixture's pairs (their UIDs are the cases'
// names), one UPDATE of the changed ones, and the cache holds every new
// text, told or not.
func TestRestartSamePodsNotTold(t *testing.T) {
	cases := resyncCases(t)
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.hello(5)
	for i, c := range cases {
		f.pods(uint64(6+i), "ADD", "file", c.Before)
	}
	f.synced(100, false)
	x.r.skip(t, func(string) bool { return false })
	x.r.expect(t, "pods ADD file"+allUIDs(x.c), "synced state")
	f.send(`{"type":"error","seq":101,"reason":"ShuttingDown","message":"bye"}`)
	x.r.expect(t, "error server ShuttingDown", "reconnect after 100")
	f.accept()
	f.hello(9000)
	for i, c := range cases {
		f.pods(uint64(9001+i), "ADD", "file", c.After)
	}
	f.synced(9900, false)
	var changed []string
	for _, c := range cases {
		if c.Changed {
			changed = append(changed, c.Name)
		}
	}
	sort.Strings(changed)
	x.r.skip(t, func(string) bool { return false })
	x.r.mu.Lock()
	got := x.r.log[0]
	x.r.mu.Unlock()
	if w := strings.Fields(got); len(w) > 4 {
		sort.Strings(w[4:]) // in the cache's order
		got = strings.Join(w, " ")
	}
	x.r.mu.Lock()
	x.r.log[0] = got
	x.r.mu.Unlock()
	x.r.expect(t, "pods UPDATE file resync "+strings.Join(changed, " "), "synced state")
	for _, c := range cases {
		if p, _ := x.c.PodByUID(c.Name); p.JSON() != c.After {
			t.Errorf("case %s: the cache holds %s", c.Name, p.JSON())
		}
	}
	x.r.checkModel(t, x.c)
}

// allUIDs is " uid uid ..." of the cache, in its order.
func allUIDs(c *Client) string {
	s := ""
	for _, p := range c.Pods() {
		s += " " + p.UID()
	}
	return s
}

// A pod is its source and UID (doc/protocol.md): a live upsert that
// carries it under another name or namespace replaces the pod held (no
// second entry), a REMOVE finds it whatever name it carries, and a SET
// holds one pod per source and UID (the later one).
func TestRenamedSameUID(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	f.pods(20, "UPDATE", "file", podText("a", "default", "zeta", "file", 2))
	f.pods(21, "ADD", "file", podText("b", "other", "beta", "file", 2))
	x.r.expect(t, "pods UPDATE file a", "pods ADD file b")
	if _, ok := x.c.PodByName("default", "alpha"); ok || x.c.Len() != 3 {
		t.Fatalf("after the rename: %v", x.c.Pods())
	}
	if p, ok := x.c.PodByName("other", "beta"); !ok || p.UID() != "b" {
		t.Fatalf("by name other/beta: %v %v", p, ok)
	}
	if got := allUIDs(x.c); got != " c a b" {
		t.Fatalf("order:%s", got)
	}
	x.r.checkModel(t, x.c)
	f.pods(22, "ADD", "api", podText("a", "default", "alpha", "api", 1))
	f.pods(23, "REMOVE", "file", podText("a", "default", "old-name", "file", 1))
	x.r.expect(t, "pods ADD api a", "pods REMOVE file a")
	if p, _ := x.c.PodByUID("a"); x.c.Len() != 3 || p.Source() != "api" {
		t.Fatalf("after the REMOVE: %v", x.c.Pods())
	}
	x.r.checkModel(t, x.c)
	f.pods(24, "SET", "file", podText("x", "default", "one", "file", 1), podText("y", "default", "aaa", "file", 1),
		podText("x", "default", "two", "file", 2))
	x.r.expect(t, "pods SET file x y x")
	if p, _ := x.c.PodByUID("x"); x.c.Len() != 2 || p.Name() != "two" {
		t.Fatalf("after the SET: %v", x.c.Pods())
	}
	x.r.checkModel(t, x.c)
}

func TestPartialLineAfterCut(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	f.pods(30, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	half := `{"type":"pods","seq":31,"op":"ADD","source":"file","pods":[{"meta`
	f.write([]byte(half))
	f.close()
	// The whole message is applied, the partial line dropped, and the
	// resume comes right after the last whole message.
	x.r.expect(t, "pods UPDATE file a", "error closed", "reconnect after 30")
	f.accept()
	if f.first != `{"resume_after":30}` {
		t.Fatalf("first line %q", f.first)
	}
	x.r.checkModel(t, x.c)
	x.r.mu.Lock()
	defer x.r.mu.Unlock()
	found := false
	for _, l := range x.r.logLines {
		found = found || strings.Contains(l, fmt.Sprintf("dropped a partial line of %d bytes", len(half)))
	}
	if !found {
		t.Fatalf("no log of the dropped line: %q", x.r.logLines)
	}
}

func TestUnknownTypeIgnored(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.hello(5)
	f.send(`{"type":"future","seq":6,"anything":[1,{"x":null}]}`)
	f.pods(7, "ADD", "file", podText("a", "default", "alpha", "file", 1))
	f.synced(8, false)
	f.send(`{"seq":9,"type":"status","protocol":1}`)
	// Members this package does not know are ignored too.
	f.send(`{"type":"pods","seq":10,"op":"UPDATE","source":"file","later":{"a":1},"pods":[%s]}`,
		`{"metadata":{"uid":"a","name":"alpha","namespace":"default"},"x":2}`)
	x.r.expect(t, "pods ADD file a", "synced state", "pods UPDATE file a")
	if p, _ := x.c.ResumePoint(); p != 10 {
		t.Fatalf("resume point %d", p)
	}
	// A pod without the annotation takes the message's source.
	if p, _ := x.c.PodByUID("a"); p.Source() != "file" {
		t.Fatalf("source %q", p.Source())
	}
	x.r.checkModel(t, x.c)
	x.r.none(t)
}

func TestProtocolMismatch(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	// Whatever else a protocol 2 hello says, the number decides.
	f.send(`{"type":"hello","protocol":2,"seq":"new-style","mode":7}`)
	x.r.expect(t, "error protocol fatal")
	err := x.result(t)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrProtocol) || !errors.Is(err, syscall.EPROTONOSUPPORT) || !e.Fatal {
		t.Fatalf("Run returned %v", err)
	}
	if !strings.Contains(err.Error(), "speaks protocol 2") {
		t.Fatalf("message %q", err.Error())
	}
	// A client runs once.
	if err := x.c.Run(context.Background()); err != ErrStopped {
		t.Fatalf("second Run: %v", err)
	}
	x.r.none(t)
}

func TestDaemonRestart(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	// The daemon exits: its error, then the socket file goes.
	f.send(`{"type":"error","seq":11,"reason":"ShuttingDown","message":"bye"}`)
	f.close()
	f.unlisten()
	x.r.expect(t, "error server ShuttingDown", "reconnect after 10")
	// No socket yet: retried with a growing backoff, never fatal.
	x.r.expect(t, "error connect", "reconnect after 10", "error connect", "reconnect after 10")
	e := x.r.lastErr()
	if !errors.Is(e, ErrConnect) || !errors.Is(e, syscall.ENOENT) || !errors.Is(e, fs.ErrNotExist) || e.Fatal {
		t.Fatalf("error %+v", e)
	}
	x.r.mu.Lock()
	rc := append([]Reconnect(nil), x.r.reconnects...)
	x.r.mu.Unlock()
	if rc[0].Delay != time.Millisecond || rc[1].Delay != 2*time.Millisecond || rc[2].Delay != 4*time.Millisecond ||
		rc[0].Attempt != 1 || rc[2].Attempt != 3 {
		t.Fatalf("backoff %+v", rc)
	}
	// The new daemon numbers from its start time: 10 is older than its
	// history, so it sends the full state.
	f.listen()
	f.accept()
	if f.first != `{"resume_after":10}` {
		t.Fatalf("first line %q", f.first)
	}
	f.hello(9000000)
	f.pods(9000001, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "kube-system", "beta", "file", 1))
	f.synced(9000002, false)
	// The api source has not delivered yet in the new daemon: its pod is
	// held over, not removed (doc/protocol.md, "A restarted daemon's late
	// sources").  (Before that, the connect errors until the socket came
	// back.)
	x.r.skip(t, func(s string) bool { return s == "error connect" || s == "reconnect after 10" })
	x.r.expect(t, "synced state")
	if p, ok := x.c.PodByUID("c"); !ok || p.Source() != "api" || !x.c.HasSynced() {
		t.Fatalf("api's pod: %v %v", p, ok)
	}
	x.r.checkModel(t, x.c)
	// It delivers the same pod: nothing of it is handed on (the ADD goes
	// on empty, as the daemon's own marker of a source seen).
	f.pods(9000003, "ADD", "api", podText("c", "default", "gamma", "api", 1))
	f.send(`{"type":"sources_ready","seq":9000004,"sources":["api","file"]}`)
	x.r.expect(t, "pods ADD api", "ready api file")
	if x.c.Len() != 3 {
		t.Fatalf("%d pods", x.c.Len())
	}
	x.r.checkModel(t, x.c)
	// Back to the first delay once synced.
	f.close()
	waitFor(t, "a reconnection after the sync", func() bool {
		x.r.mu.Lock()
		defer x.r.mu.Unlock()
		last := x.r.reconnects[len(x.r.reconnects)-1]
		return last.ResumeAfter == 9000004 && last.Delay == time.Millisecond && last.Attempt == 1
	})
}

// startThreeSources gives a client the state file a, b; api c, d, e, x;
// http h; then the daemon's ShuttingDown, and accepts the next
// connection.
func startThreeSources(t *testing.T, f *fake, x *running, mode string) {
	t.Helper()
	f.accept()
	f.send(`{"type":"hello","protocol":1,"mode":"%s","node":"n1","seq":5}`, mode)
	f.pods(6, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 1))
	f.pods(7, "ADD", "api", podText("c", "default", "gamma", "api", 1), podText("d", "default", "delta", "api", 1),
		podText("e", "default", "eps", "api", 1), podText("x", "default", "xi", "api", 1))
	f.pods(8, "ADD", "http", podText("h", "default", "eta", "http", 1))
	f.synced(10, false)
	f.send(`{"type":"sources_ready","seq":11,"sources":["api","file","http"]}`)
	f.send(`{"type":"error","seq":12,"reason":"ShuttingDown","message":"bye"}`)
	x.r.expect(t, "pods ADD api d e c x", "pods ADD file a b", "pods ADD http h", "synced state",
		"ready api file http", "error server ShuttingDown", "reconnect after 11")
	f.accept()
}

// A daemon restart whose api source delivers late (the API server
// unreachable for a while): the full state has file and http only.  No
// api pod is removed then; when api delivers, an unchanged pod is not
// handed on, a changed one is an UPDATE flagged resync, a new one goes in
// the ADD; another op on a held pod goes as sent; sources_ready removes
// the pod api did not deliver again.  Meanwhile HasSynced holds.  As the
// C library's test_restart_late_source.
func TestRestartLateSource(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	startThreeSources(t, f, x, "incremental")
	f.hello(900)
	f.pods(901, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 2))
	f.pods(902, "ADD", "http")
	f.synced(903, false)
	x.r.expect(t, "pods UPDATE file resync b", "pods REMOVE http resync h", "synced state")
	if !x.c.HasSynced() || x.c.Len() != 6 {
		t.Fatalf("synced %v, %d pods", x.c.HasSynced(), x.c.Len())
	}
	x.r.checkModel(t, x.c)
	f.pods(904, "UPDATE", "file", podText("a", "default", "alpha", "file", 3))
	f.pods(905, "UPDATE", "api", podText("x", "default", "xi", "api", 2))
	f.pods(906, "ADD", "api", podText("c", "default", "gamma", "api", 1), podText("d", "default", "delta", "api", 2),
		podText("f", "default", "phi", "api", 1))
	x.r.expect(t, "pods UPDATE file a", "pods UPDATE api x", "pods ADD api f", "pods UPDATE api resync d")
	if x.c.Len() != 7 {
		t.Fatalf("%d pods", x.c.Len())
	}
	x.r.checkModel(t, x.c)
	f.send(`{"type":"sources_ready","seq":907,"sources":["api","file","http"]}`)
	x.r.expect(t, "pods REMOVE api resync e")
	// The same list as before the restart: not told again.
	f.pods(908, "ADD", "api", podText("c", "default", "gamma", "api", 1))
	x.r.expect(t, "pods ADD api c")
	if _, ok := x.c.PodByUID("e"); ok || x.c.Len() != 6 {
		t.Fatalf("%d pods", x.c.Len())
	}
	x.r.checkModel(t, x.c)
}

// A held pod whose source is not in the new run's sources_ready (no
// longer configured) is removed then, flagged resync.
func TestRestartSourceGone(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	startThreeSources(t, f, x, "incremental")
	f.hello(900)
	f.pods(901, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 1))
	f.pods(902, "ADD", "api", podText("c", "default", "gamma", "api", 1), podText("d", "default", "delta", "api", 1),
		podText("e", "default", "eps", "api", 1), podText("x", "default", "xi", "api", 1))
	f.synced(903, false)
	f.send(`{"type":"sources_ready","seq":904,"sources":["api","file"]}`)
	x.r.expect(t, "synced state", "pods REMOVE http resync h", "ready api file")
	if x.c.Len() != 6 {
		t.Fatalf("%d pods", x.c.Len())
	}
	x.r.checkModel(t, x.c)
}

// The hold-over lasts across connections: a replay applies as live, and
// a further full state holds again what its sources did not deliver, and
// compares what they did.
func TestRestartHeldAcrossReconnects(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	startThreeSources(t, f, x, "incremental")
	f.hello(900)
	f.pods(901, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 1))
	f.synced(903, false)
	f.send(`{"type":"error","seq":904,"reason":"SlowConsumer","message":"slow"}`)
	x.r.expect(t, "synced state", "error server SlowConsumer", "reconnect after 903")
	f.accept()
	f.hello(1000)
	f.pods(905, "ADD", "http", podText("h", "default", "eta", "http", 1))
	f.synced(1001, true)
	f.send(`{"type":"error","seq":1002,"reason":"SlowConsumer","message":"slow"}`)
	x.r.expect(t, "pods ADD http", "synced resumed", "error server SlowConsumer", "reconnect after 1001")
	f.accept()
	f.hello(2000)
	f.pods(2001, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 1))
	f.pods(2002, "ADD", "http", podText("h", "default", "eta", "http", 1))
	f.synced(2003, false)
	f.send(`{"type":"error","seq":2004,"reason":"SlowConsumer","message":"slow"}`)
	x.r.expect(t, "synced state", "error server SlowConsumer", "reconnect after 2003")
	if x.c.Len() != 7 {
		t.Fatalf("%d pods", x.c.Len())
	}
	f.accept()
	f.hello(3000)
	f.pods(3001, "ADD", "api", podText("c", "default", "gamma", "api", 2), podText("d", "default", "delta", "api", 1),
		podText("x", "default", "xi", "api", 1))
	f.pods(3002, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 1))
	f.pods(3003, "ADD", "http", podText("h", "default", "eta", "http", 1))
	f.synced(3004, false)
	x.r.expect(t, "pods REMOVE api resync e", "pods UPDATE api resync c", "synced state")
	x.r.checkModel(t, x.c)
}

// The snapshot modes: a live SET of the late source replaces the pods it
// carries, keeps the held ones it does not, and is handed on with the
// whole cache; sources_ready removes those.
func TestRestartLateSourceSnapshot(t *testing.T) {
	for _, mode := range []string{"snapshot", "snapshot-and-updates"} {
		t.Run(mode, func(t *testing.T) {
			f := newFake(t)
			x := start(t, Config{Path: f.path})
			startThreeSources(t, f, x, mode)
			merged := []string{podText("a", "default", "alpha", "file", 1), podText("b", "default", "beta", "file", 1),
				podText("h", "default", "eta", "http", 1)}
			f.send(`{"type":"hello","protocol":1,"mode":"%s","node":"n1","seq":900}`, mode)
			f.pods(901, "SET", "file", merged...)
			f.pods(902, "SET", "http", merged...)
			f.synced(903, false)
			x.r.expect(t, "synced state")
			if x.c.Len() != 7 {
				t.Fatalf("%d pods", x.c.Len())
			}
			f.pods(904, "SET", "api", podText("a", "default", "alpha", "file", 1),
				podText("b", "default", "beta", "file", 1), podText("c", "default", "gamma", "api", 2),
				podText("d", "default", "delta", "api", 1), podText("h", "default", "eta", "http", 1),
				podText("g", "default", "gimel", "api", 1))
			x.r.expect(t, "pods SET api a b d e h c g x")
			x.r.checkModel(t, x.c)
			f.send(`{"type":"sources_ready","seq":905,"sources":["api","file","http"]}`)
			x.r.expect(t, "pods REMOVE api resync e x")
			if x.c.Len() != 6 {
				t.Fatalf("%d pods", x.c.Len())
			}
			x.r.checkModel(t, x.c)
		})
	}
}

func TestSeqGoingBack(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	f.pods(20, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	f.pods(20, "UPDATE", "file", podText("a", "default", "alpha", "file", 3))
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state", "pods UPDATE file a", "error bad message",
		"reconnect after 20")
	if e := x.r.lastErr(); !errors.Is(e, ErrBadMessage) || !strings.Contains(e.Message, "sent message 20 after 20") {
		t.Fatalf("error %v", e)
	}
	f.accept()
	if f.first != `{"resume_after":20}` {
		t.Fatalf("first line %q", f.first)
	}
}

func TestMalformedLines(t *testing.T) {
	bad := []string{
		"not json",
		"[1,2]",
		"",
		`{"type":"pods","seq":20}`, // no op
		`{"type":"pods","seq":20,"op":"MOVE","source":"file","pods":[]}`,
		`{"type":"pods","seq":20,"op":"ADD","pods":[]}`, // no source
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{}}]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"","name":"x"}}]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"\u0000x","name":"x"}}]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"u","name":7}}]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"u","name":"x"},"metadata":5}]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[[]]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":{}}`,
		`{"type":"pods","seq":-1,"op":"ADD","source":"file","pods":[]}`,
		`{"type":"pods","seq":1.5,"op":"ADD","source":"file","pods":[]}`,
		`{"type":"pods","seq":18446744073709551616,"op":"ADD","source":"file","pods":[]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[]} x`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],}`,
		`{"type":"pods","seq":020,"op":"ADD","source":"file","pods":[]}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":NaN}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":"a` + "\t" + `b"}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":"\x"}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":"\u12"}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[],"x":` + strings.Repeat("[", 73) + strings.Repeat("]", 73) + `}`,
		`{"type":7,"seq":20}`,
		`{"seq":20}`,
		`{"type":"synced","seq":20,"resumed":"yes"}`,
		`{"type":"synced","seq":20,"resumed":null}`,
		`{"type":"plugin","seq":20,"op":"REGISTERED","plugin":[]}`,
		`{"type":"plugin","seq":20,"op":"REGISTERED","plugin":{"socket":1}}`,
		`{"type":"plugin","seq":20,"op":"REGISTERED"}`,
		`{"type":"plugin","seq":20,"plugin":{"socket":"/s"}}`,
		`{"type":"sources_ready","seq":20,"sources":[1]}`,
		`{"type":"sources_ready","seq":20}`,
		`{"type":"error","seq":20}`,
		`{"type":"hello","protocol":1,"seq":21}`, // a second hello
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"` + "\xff" + `"}`,
		`{"type":"pods","seq":20,"op":"ADD","source":"file","pods":[{"metadata":{"uid":"\ud800\n"}}]}`,
		`{"type":"unknown"}`, // no seq
		`{"type":"pods","seq":true}`,
	}
	for i, line := range bad {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f := newFake(t)
			x := start(t, Config{Path: f.path})
			begin(t, f)
			x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
			before := dump(x.c)
			f.send("%s", line)
			x.r.expect(t, "error bad message", "reconnect after 10")
			if e := x.r.lastErr(); !errors.Is(e, syscall.EBADMSG) || !errors.Is(e, ErrBadMessage) || e.Fatal {
				t.Fatalf("line %q: error %+v", line, e)
			}
			if after := dump(x.c); after != before {
				t.Fatalf("line %q changed the cache", line)
			}
			f.accept()
			if f.first != `{"resume_after":10}` {
				t.Fatalf("first line %q", f.first)
			}
		})
	}
}

func TestBadBeforeHello(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.synced(3, false)
	x.r.expect(t, "error bad message", "reconnect full")
	if e := x.r.lastErr(); e.Fatal || !strings.Contains(e.Message, "before its hello") {
		t.Fatalf("error %+v", e)
	}
}

func TestReplayNotAsked(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.hello(3)
	f.synced(4, true)
	x.r.expect(t, "error bad message", "reconnect full")
}

func TestReplayGoingBack(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path, Resume: true, ResumeAfter: 50})
	f.accept()
	f.hello(60)
	f.pods(51, "ADD", "file", podText("a", "default", "alpha", "file", 1))
	f.pods(50, "ADD", "file", podText("b", "default", "beta", "file", 1))
	f.synced(61, true)
	// The first is applied; the resume goes on after it.
	x.r.expect(t, "pods ADD file a", "error bad message", "reconnect after 51")
}

// TestServerErrors runs the server_errors of the shared scenario table:
// the kind, errno and fatality each reason gives.
func TestServerErrors(t *testing.T) {
	b, err := os.ReadFile("../tests/fixtures/informer-scenarios.json")
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		ServerErrors []struct {
			Reason string `json:"reason"`
			Kind   string `json:"kind"`
			Errno  string `json:"errno"`
			Fatal  bool   `json:"fatal"`
		} `json:"server_errors"`
	}
	if err := json.Unmarshal(b, &table); err != nil || len(table.ServerErrors) == 0 {
		t.Fatalf("server_errors: %v", err)
	}
	errnos := map[string]syscall.Errno{"EACCES": syscall.EACCES, "EINVAL": syscall.EINVAL,
		"ENOBUFS": syscall.ENOBUFS, "EUSERS": syscall.EUSERS, "ENOMEM": syscall.ENOMEM,
		"ESHUTDOWN": syscall.ESHUTDOWN, "EIO": syscall.EIO}
	// What else the error matches with errors.Is, by reason.
	is := map[string]error{"Forbidden": ErrForbidden, "BadRequest": ErrBadRequest,
		"SlowConsumer": ErrSlowConsumer, "TooManyConsumers": ErrTooManyConsumers,
		"ResourceExhausted": ErrResourceExhausted, "ShuttingDown": ErrShuttingDown,
		"InternalError": ErrInternalError}
	for _, k := range table.ServerErrors {
		k := k
		t.Run(k.Reason, func(t *testing.T) {
			errno, ok := errnos[k.Errno]
			if !ok {
				t.Fatalf("unknown errno %s", k.Errno)
			}
			want := is[k.Reason]
			if want == nil {
				want = ErrServer
			}
			f := newFake(t)
			x := start(t, Config{Path: f.path})
			f.accept()
			// A refused connection gets the error without a hello.
			f.send(`{"type":"error","seq":4,"reason":"%s","message":"m"}`, k.Reason)
			if k.Fatal {
				x.r.expect(t, "error "+k.Kind+" "+k.Reason+" fatal")
				err := x.result(t)
				if !errors.Is(err, want) || (k.Reason != "SlowConsumer" && errors.Is(err, ErrSlowConsumer)) {
					t.Fatalf("Run returned %v", err)
				}
			} else {
				x.r.expect(t, "error "+k.Kind+" "+k.Reason, "reconnect full")
			}
			e := x.r.lastErr()
			if e.Kind.String() != k.Kind || e.Errno != errno || e.Fatal != k.Fatal || !errors.Is(e, want) ||
				!errors.Is(e, errno) || e.Reason != k.Reason {
				t.Fatalf("error %+v", e)
			}
			if k.Reason == "Forbidden" && !errors.Is(e, ErrPermission) {
				t.Fatal("Forbidden is not ErrPermission")
			}
		})
	}
}

func TestWrongPath(t *testing.T) {
	x := start(t, Config{Path: "/nonexistent/podmux.sock", NoReconnect: true})
	err := x.result(t)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindConnect || !e.Fatal || !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("Run returned %v", err)
	}
	x.r.expect(t, "error connect fatal")
	if !strings.Contains(e.Message, `"/nonexistent/podmux.sock"`) {
		t.Fatalf("message %q", e.Message)
	}
	// A regular file and a directory: no socket.
	dir := t.TempDir()
	file := filepath.Join(dir, "regular")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, dir} {
		z := start(t, Config{Path: path, NoReconnect: true})
		if err := z.result(t); !errors.Is(err, syscall.ENOTSOCK) || !errors.Is(err, ErrConnect) {
			t.Fatalf("%s: Run returned %v", path, err)
		}
	}
	long := "/" + strings.Repeat("x", 198)
	y := start(t, Config{Path: long})
	err = y.result(t)
	if !errors.Is(err, syscall.ENAMETOOLONG) || !errors.Is(err, ErrConnect) {
		t.Fatalf("Run returned %v", err)
	}
	y.r.expect(t, "error connect fatal")
}

func TestPermissionRefused(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root connects whatever the socket's mode")
	}
	f := newFake(t)
	if err := os.Chmod(f.path, 0); err != nil {
		t.Fatal(err)
	}
	x := start(t, Config{Path: f.path})
	err := x.result(t)
	if !errors.Is(err, ErrPermission) || !errors.Is(err, syscall.EACCES) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestSnapshotSet(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.send(`{"type":"hello","protocol":1,"mode":"snapshot","node":"n1","seq":5}`)
	// One SET per source, each the whole merged state, keyed by each
	// pod's own source annotation.
	f.pods(6, "SET", "api", podText("a", "default", "alpha", "file", 1), podText("c", "default", "gamma", "api", 1))
	f.pods(7, "SET", "file", podText("a", "default", "alpha", "file", 1), podText("c", "default", "gamma", "api", 1))
	f.synced(8, false)
	f.pods(9, "SET", "file", podText("c", "default", "gamma", "api", 1), podText("d", "default", "delta", "file", 1))
	x.r.expect(t, "pods ADD api c", "pods ADD file a", "synced state", "pods SET file c d")
	if p, _ := x.c.PodByUID("c"); p.Source() != "api" {
		t.Fatalf("source %q", p.Source())
	}
	if x.c.Len() != 2 {
		t.Fatalf("len %d", x.c.Len())
	}
	x.r.checkModel(t, x.c)
	// A SET out of order, with a pod twice: sorted, the last one wins.
	f.pods(10, "SET", "*", podText("z", "default", "zeta", "file", 1), podText("d", "default", "delta", "file", 1),
		podText("z", "default", "zeta", "file", 2))
	x.r.expect(t, "pods SET * z d z")
	if got := dump(x.c); got != "file/d="+podText("d", "default", "delta", "file", 1)+"\nfile/z="+
		podText("z", "default", "zeta", "file", 2)+"\n" {
		t.Fatalf("cache %s", got)
	}
}

func TestMaxLine(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path, MaxLine: 400})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	f.pods(20, "ADD", "file", podText("x", "default", "x", "file", 1), podText("y", "default", "y", "file", 1),
		podText("z", "default", "z", "file", 1))
	x.r.expect(t, "error bad message", "reconnect after 10")
	if e := x.r.lastErr(); !errors.Is(e, syscall.EMSGSIZE) {
		t.Fatalf("error %+v", e)
	}
	if _, ok := x.c.PodByUID("x"); ok {
		t.Fatal("x applied")
	}
	// A partial line longer than the limit is refused before its end.
	f.accept()
	f.hello(30)
	f.synced(31, true)
	x.r.expect(t, "synced resumed")
	f.write([]byte(strings.Repeat(" ", 401)))
	x.r.expect(t, "error bad message", "reconnect after 31")
	// A line of exactly the limit is fine.
	f.accept()
	f.hello(40)
	f.synced(41, true)
	line := `{"type":"x","seq":42}`
	f.send("%s%s", line, strings.Repeat(" ", 400-len(line)))
	f.barrier(x.r, 43)
	waitFor(t, "the resume point at the barrier's second message", func() bool {
		p, _ := x.c.ResumePoint()
		return p == 44
	})
	x.r.expect(t, "synced resumed")
	x.r.none(t)
}

func TestCancelFromHandler(t *testing.T) {
	f := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var seen []string
	c := NewClient(Config{Path: f.path, Handlers: Handlers{
		Pods: func(u Update) {
			mu.Lock()
			seen = append(seen, u.Op.String()+" "+u.Pods[0].UID())
			mu.Unlock()
			cancel()
		},
		Synced: func(bool) { t.Error("synced after the cancel") },
	}})
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	f.accept()
	// One write: the handler's cancel closes the connection, and a write
	// after that would fail.
	f.write([]byte(`{"type":"hello","protocol":1,"mode":"incremental","node":"n1","seq":5}` + "\n" +
		`{"type":"pods","seq":6,"op":"ADD","source":"file","pods":[` + podText("a", "default", "alpha", "file", 1) + "]}\n" +
		`{"type":"synced","seq":7,"resumed":false}` + "\n" +
		`{"type":"pods","seq":8,"op":"ADD","source":"file","pods":[` + podText("b", "default", "beta", "file", 1) + "]}\n"))
	// Run returns when a handler cancels its context; nothing after.
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "ADD a" || c.Len() != 1 {
		t.Fatalf("saw %v, %d pods", seen, c.Len())
	}
}

// A handler that cancels in a replay: nothing more is applied, and the
// resume point is the last message the handlers saw, so a client that
// resumes from it loses nothing.
func TestCancelMidReplay(t *testing.T) {
	f := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var seen []string
	armed := false
	c := NewClient(Config{Path: f.path, Handlers: Handlers{
		Pods: func(u Update) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, u.Op.String()+" "+u.Pods[0].UID())
			if armed {
				cancel()
			}
		},
	}})
	c.setBackoff(time.Millisecond, 8*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	f.accept()
	f.hello(5)
	f.pods(6, "ADD", "file", podText("a", "default", "alpha", "file", 1))
	f.synced(10, false)
	f.pods(20, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	waitFor(t, "the update", func() bool { p, _ := c.ResumePoint(); return p == 20 })
	mu.Lock()
	armed = true
	mu.Unlock()
	f.close()
	f.accept()
	if f.first != `{"resume_after":20}` {
		t.Fatalf("first line %q", f.first)
	}
	// One write: the handler's cancel closes the connection.
	f.write([]byte(`{"type":"hello","protocol":1,"mode":"incremental","node":"n1","seq":40}` + "\n" +
		`{"type":"pods","seq":21,"op":"ADD","source":"file","pods":[` + podText("e", "default", "eps", "file", 1) + "]}\n" +
		`{"type":"pods","seq":25,"op":"UPDATE","source":"file","pods":[` + podText("a", "default", "alpha", "file", 3) + "]}\n" +
		`{"type":"synced","seq":41,"resumed":true}` + "\n"))
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if p, _ := c.ResumePoint(); p != 21 || strings.Join(seen, ",") != "ADD a,UPDATE a,ADD e" {
		t.Fatalf("resume point %d, saw %v", p, seen)
	}
	if p, _ := c.PodByUID("a"); !strings.Contains(p.JSON(), `"gen":2`) {
		t.Fatalf("a applied past the stop: %s", p.JSON())
	}
}

// A source handler that cancels as the first live message ends the
// sources' confirmation (a source not said again is live): that message
// is not applied.
func TestCancelFromSourceHandler(t *testing.T) {
	f := newFake(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := NewClient(Config{Path: f.path, Handlers: Handlers{
		Source: func(s SourceState) {
			if s.State == "live" {
				cancel()
			}
		},
	}})
	c.setBackoff(time.Millisecond, 8*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	f.accept()
	f.hello(100)
	f.synced(101, false)
	f.send(`{"type":"source","seq":102,"source":"api","state":"checkpoint"}`)
	waitFor(t, "the source's state", func() bool { p, _ := c.ResumePoint(); return p == 102 })
	f.close()
	f.accept()
	f.write([]byte(`{"type":"hello","protocol":1,"mode":"incremental","node":"n1","seq":200}` + "\n" +
		`{"type":"synced","seq":201,"resumed":true}` + "\n" +
		`{"type":"pods","seq":202,"op":"ADD","source":"file","pods":[` + podText("a", "default", "alpha", "file", 1) + "]}\n"))
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	if p, _ := c.ResumePoint(); p != 201 || c.Len() != 0 {
		t.Fatalf("resume point %d, %d pods", p, c.Len())
	}
}

func TestCancelWhileReading(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	x.cancel()
	if err := x.result(t); err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	// While waiting to reconnect, too.
	y := start(t, Config{Path: "/nonexistent/podmux.sock"})
	y.r.expect(t, "error connect", "reconnect full")
	y.c.setBackoff(time.Hour, time.Hour)
	y.cancel()
	if err := y.result(t); err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	// And before it started.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewClient(Config{Path: f.path}).Run(ctx); err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
}

// After Config.Resume (a point saved by an earlier run of the program)
// the cache holds only what came after it: HasSynced stays false through
// replays, and a full state is handed on whole, one SET of every pod and
// every plugin REGISTERED; from then on the cache is whole.  As the C
// library's test_saved_resume_partial_cache.
func TestSavedResumePartialCache(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path, Resume: true, ResumeAfter: 77})
	if x.c.HasSynced() {
		t.Fatal("synced before any connection")
	}
	f.accept()
	if f.first != `{"resume_after":77}` {
		t.Fatalf("first line %q", f.first)
	}
	f.hello(200)
	f.pods(80, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	f.synced(201, true)
	x.r.expect(t, "pods UPDATE file a", "synced resumed")
	if x.c.HasSynced() || x.c.Len() != 1 {
		t.Fatalf("after the replay: synced %v, %d pods", x.c.HasSynced(), x.c.Len())
	}
	f.close()
	x.r.expect(t, "error closed", "reconnect after 201")
	f.accept()
	f.hello(300)
	f.pods(250, "ADD", "api", podText("c", "default", "gamma", "api", 1))
	f.synced(301, true)
	x.r.expect(t, "pods ADD api c", "synced resumed")
	if x.c.HasSynced() {
		t.Fatal("synced after a second replay")
	}
	f.send(`{"type":"error","seq":302,"reason":"ShuttingDown","message":"bye"}`)
	x.r.expect(t, "error server ShuttingDown", "reconnect after 301")
	f.accept()
	f.hello(9000)
	f.pods(9001, "ADD", "file", podText("a", "default", "alpha", "file", 2), podText("b", "kube-system", "beta", "file", 1))
	f.send(`{"type":"plugin","seq":9002,"op":"REGISTERED","plugin":{"socket":"/p/a.sock","type":"CSIPlugin","name":"a"}}`)
	f.synced(9003, false)
	x.r.expect(t, "pods SET * resync a b", "plugin REGISTERED /p/a.sock resync", "synced state")
	if !x.c.HasSynced() || x.c.Len() != 2 {
		t.Fatalf("after the full state: synced %v, %d pods", x.c.HasSynced(), x.c.Len())
	}
	x.r.checkModel(t, x.c)
	f.send(`{"type":"error","seq":9004,"reason":"SlowConsumer","message":"slow"}`)
	x.r.expect(t, "error server SlowConsumer", "reconnect after 9003")
	f.accept()
	f.hello(9100)
	f.pods(9101, "ADD", "file", podText("a", "default", "alpha", "file", 2))
	f.send(`{"type":"plugin","seq":9102,"op":"REGISTERED","plugin":{"socket":"/p/a.sock","type":"CSIPlugin","name":"a"}}`)
	f.synced(9103, false)
	x.r.expect(t, "pods REMOVE file resync b", "synced state")
	x.r.checkModel(t, x.c)
}

func TestSavedResumeLinesAndLog(t *testing.T) {
	f := newFake(t)
	var mu sync.Mutex
	var lines, logs []string
	c := NewClient(Config{Path: f.path, Resume: true, ResumeAfter: 77, Handlers: Handlers{
		Line: func(l []byte) {
			mu.Lock()
			lines = append(lines, string(l))
			mu.Unlock()
		},
		Log: func(level LogLevel, line string) {
			mu.Lock()
			logs = append(logs, line)
			mu.Unlock()
		},
	}})
	if p, ok := c.ResumePoint(); !ok || p != 77 {
		t.Fatalf("resume point %d %v", p, ok)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	f.accept()
	if f.first != `{"resume_after":77}` {
		t.Fatalf("first line %q", f.first)
	}
	f.hello(5)
	f.synced(6, false)
	waitFor(t, "synced", c.HasSynced)
	mu.Lock()
	defer mu.Unlock()
	want := `{"type":"hello","protocol":1,"mode":"incremental","node":"n1","seq":5}` + "\n" +
		`{"type":"synced","seq":6,"resumed":false}`
	if strings.Join(lines, "\n") != want {
		t.Fatalf("lines %q", lines)
	}
	if len(logs) == 0 {
		t.Fatal("no log line")
	}
	for _, l := range logs {
		if !strings.Contains(l, f.path) {
			t.Fatalf("a log line that does not name the socket: %q", l)
		}
	}
}

// Reads from other goroutines while the client applies: the race
// detector checks the guard, and every read sees a whole state.
func TestConcurrentReads(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	f.accept()
	f.hello(5)
	f.synced(6, false)
	x.r.expect(t, "synced state")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pods := x.c.Pods()
				for i := 1; i < len(pods); i++ {
					if comparePods(pods[i-1].p, pods[i].p) >= 0 {
						t.Error("a read saw the pods out of order")
						return
					}
				}
				x.c.PodByUID("u7")
				x.c.PodByName("default", "p7")
				x.c.PodsByNamespace("default")
				x.c.Len()
				x.c.ResumePoint()
				x.c.HasSynced()
			}
		}()
	}
	for i := 0; i < 200; i++ {
		op := "ADD"
		if i%3 == 2 {
			op = "REMOVE"
		}
		n := i % 20
		f.pods(uint64(10+i), op, "file", podText(fmt.Sprintf("u%d", n), "default", fmt.Sprintf("p%d", n), "file", i))
	}
	f.barrier(x.r, 1000)
	close(stop)
	wg.Wait()
	x.r.checkModel(t, x.c)
}

func TestNames(t *testing.T) {
	if OpReconcile.String() != "RECONCILE" || Op(42).String() != "Op(42)" {
		t.Fatal(OpReconcile.String(), Op(42).String())
	}
	if LogDebug.String() != "debug" || LogLevel(9).String() != "LogLevel(9)" {
		t.Fatal(LogDebug.String())
	}
	if KindBadMessage.String() != "bad message" || ErrorKind(99).String() != "unknown" {
		t.Fatal(KindBadMessage.String())
	}
	var z Pod
	if !z.IsZero() || z.UID() != "" || z.Name() != "" || z.Namespace() != "" || z.Source() != "" || z.JSON() != "" ||
		z.String() != "<no pod>" || z.Decode(&struct{}{}) == nil {
		t.Fatal("zero Pod")
	}
	e := &Error{Kind: KindClosed, Message: "m"}
	if e.Error() != "podmux: m" || e.Unwrap() != nil || errors.Is(e, ErrConnect) || errors.Is(e, ErrForbidden) {
		t.Fatal("Error")
	}
	for _, err := range []error{ErrConnect, ErrForbidden, ErrStopped} {
		if !strings.HasPrefix(err.Error(), "podmux: ") {
			t.Fatal(err)
		}
	}
	if NewClient(Config{}).Path() != DefaultSocket {
		t.Fatal("default path")
	}
}

func TestNoReconnect(t *testing.T) {
	for _, c := range []struct {
		send  string
		is    error
		errno syscall.Errno
	}{
		{"", ErrClosed, syscall.ECONNRESET},
		{`{"type":"error","seq":11,"reason":"ShuttingDown","message":"bye"}`, ErrShuttingDown, syscall.ESHUTDOWN},
		{`{"type":"error","seq":11,"reason":"SlowConsumer","message":"slow"}`, ErrSlowConsumer, syscall.ENOBUFS},
	} {
		f := newFake(t)
		x := start(t, Config{Path: f.path, NoReconnect: true})
		begin(t, f)
		x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
		if c.send != "" {
			f.send("%s", c.send)
		}
		f.close()
		err := x.result(t)
		var e *Error
		if !errors.As(err, &e) || !e.Fatal || !errors.Is(err, c.is) || !errors.Is(err, c.errno) {
			t.Fatalf("after %q Run returned %v", c.send, err)
		}
		// The cache stays readable.
		if x.c.Len() != 3 || !x.c.HasSynced() {
			t.Fatalf("%d pods after Run", x.c.Len())
		}
	}
}

func TestBackoffCap(t *testing.T) {
	c := NewClient(Config{Path: "/nonexistent/podmux.sock"})
	if c.backoffMin != BackoffMin || c.backoffMax != BackoffMax || c.backoff != BackoffMin {
		t.Fatalf("backoff %v %v %v", c.backoff, c.backoffMin, c.backoffMax)
	}
	r := newRec()
	c = NewClient(Config{Path: "/nonexistent/podmux.sock", Handlers: r.handlers()})
	c.setBackoff(time.Millisecond, 3*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(t, "five reconnections", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.reconnects) >= 5
	})
	cancel()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	var got []string
	for _, rc := range r.reconnects[:5] {
		got = append(got, fmt.Sprintf("%v#%d", rc.Delay, rc.Attempt))
	}
	if strings.Join(got, " ") != "1ms#1 2ms#2 3ms#3 3ms#4 3ms#5" {
		t.Fatalf("delays %v", got)
	}
}

// The constants are the C library's (include/podmux/client.h).
func TestConstantsAsInC(t *testing.T) {
	h, err := os.ReadFile("../include/podmux/client.h")
	if err != nil {
		t.Skipf("no C header (the module outside the podmux tree): %v", err)
	}
	value := func(name string) string {
		for _, line := range strings.Split(string(h), "\n") {
			if f := strings.Fields(line); len(f) >= 3 && f[0] == "#define" && f[1] == name {
				return strings.Join(f[2:], " ")
			}
		}
		t.Fatalf("no %s in client.h", name)
		return ""
	}
	product := func(expr string) uint64 {
		n := uint64(1)
		for _, f := range strings.Split(strings.Trim(expr, "()"), "*") {
			var v uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(f), "%du", &v); err != nil {
				t.Fatalf("%q: %v", expr, err)
			}
			n *= v
		}
		return n
	}
	if got := product(value("PODMUX_CLIENT_BACKOFF_MIN_USEC")); time.Duration(got)*time.Microsecond != BackoffMin {
		t.Errorf("backoff min %d µs in C", got)
	}
	if got := product(value("PODMUX_CLIENT_BACKOFF_MAX_USEC")); time.Duration(got)*time.Microsecond != BackoffMax {
		t.Errorf("backoff max %d µs in C", got)
	}
	if got := product(value("PODMUX_CLIENT_DEFAULT_MAX_LINE")); got != DefaultMaxLine {
		t.Errorf("max line %d in C", got)
	}
	if got := value("PODMUX_CLIENT_PROTOCOL"); got != fmt.Sprint(Protocol) {
		t.Errorf("protocol %s in C", got)
	}
	if got := value("PODMUX_CLIENT_DEFAULT_SOCKET"); got != `"`+DefaultSocket+`"` {
		t.Errorf("default socket %s in C", got)
	}
}

func cpMsg(seq uint64, time, rv string) string {
	return fmt.Sprintf(`{"type":"source","seq":%d,"source":"api","state":"checkpoint",`+
		`"checkpoint":{"time":"%s","resource_version":"%s"}}`, seq, time, rv)
}

func liveMsg(seq uint64) string {
	return fmt.Sprintf(`{"type":"source","seq":%d,"source":"api","state":"live"}`, seq)
}

// The "source" message: a state kept and told when it changes, "live"
// ends it, a state not known is passed on as such (doc/protocol.md); as
// tests/unit/test_client.c test_source_state.
func TestSourceState(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
	if st, ok := x.c.SourceState("api"); ok || st.Serving != ServingLive || st.State != "live" || st.Source != "api" {
		t.Fatalf("never said: %+v %v", st, ok)
	}
	f.send("%s", cpMsg(11, "2026-11-24T09:58:00Z", "48213"))
	f.pods(12, "ADD", "api", podText("k", "default", "kappa", "api", 1))
	// Said again, the same: nothing to tell.
	f.send("%s", cpMsg(13, "2026-11-24T09:58:00Z", "48213"))
	f.barrier(x.r, 14)
	x.r.expect(t, "source api checkpoint 2026-11-24T09:58:00Z 48213 11", "pods ADD api k")
	x.r.none(t)
	st, ok := x.c.SourceState("api")
	if !ok || st.Serving != ServingCheckpoint || st.CheckpointTime != "2026-11-24T09:58:00Z" ||
		st.CheckpointResourceVersion != "48213" || st.Seq != 11 || st.Resync {
		t.Fatalf("checkpoint: %+v %v", st, ok)
	}
	if _, ok := x.c.SourceState("file"); ok {
		t.Fatal("file not live")
	}
	f.send("%s", cpMsg(20, "2026-11-24T10:00:00Z", "48300"))
	f.send("%s", liveMsg(21))
	f.pods(22, "REMOVE", "api", podText("k", "default", "kappa", "api", 1))
	f.send("%s", liveMsg(23))
	f.send(`{"type":"source","seq":24,"source":"http","state":"stale","checkpoint":null,"extra":1}`)
	f.barrier(x.r, 25)
	x.r.expect(t, "source api checkpoint 2026-11-24T10:00:00Z 48300 20", "source api live 21", "pods REMOVE api k",
		"source http stale 24")
	x.r.none(t)
	if st, ok := x.c.SourceState("api"); ok || st.Serving != ServingLive {
		t.Fatalf("live: %+v %v", st, ok)
	}
	if st, ok := x.c.SourceState("http"); !ok || st.Serving != ServingUnknown || st.State != "stale" ||
		st.CheckpointTime != "" {
		t.Fatalf("unknown: %+v %v", st, ok)
	}
	if ServingCheckpoint.String() != "checkpoint" || ServingLive.String() != "live" ||
		ServingUnknown.String() != "unknown" || Serving(9).String() != "Serving(9)" {
		t.Fatal("serving names")
	}
	x.r.checkModel(t, x.c)
}

// cutAndFullState: cut, then a full state of another daemon run.
func cutAndFullState(f *fake, hello uint64) {
	f.close()
	f.accept()
	f.hello(hello)
	f.pods(hello+1, "ADD", "file", podText("a", "default", "alpha", "file", 1), podText("b", "kube-system", "beta", "file", 1))
	f.pods(hello+2, "ADD", "api", podText("c", "default", "gamma", "api", 1))
	f.synced(hello+3, false)
}

// Source states across reconnections (test_source_state_reconnect).
func TestSourceStateReconnect(t *testing.T) {
	f := newFake(t)
	x := start(t, Config{Path: f.path})
	begin(t, f)
	f.send("%s", cpMsg(11, "2026-11-24T09:58:00Z", "48213"))
	x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state", "source api checkpoint 2026-11-24T09:58:00Z 48213 11")
	// Resumed, still serving it: said again after synced, not told.
	f.close()
	x.r.expect(t, "error closed", "reconnect after 11")
	f.accept()
	if f.first != `{"resume_after":11}` {
		t.Fatalf("first line %q", f.first)
	}
	f.hello(40)
	f.synced(41, true)
	f.send("%s", cpMsg(42, "2026-11-24T09:58:00Z", "48213"))
	f.pods(43, "UPDATE", "file", podText("a", "default", "alpha", "file", 2))
	x.r.expect(t, "synced resumed", "pods UPDATE file a")
	if st, ok := x.c.SourceState("api"); !ok || st.Seq != 11 {
		t.Fatalf("kept: %+v %v", st, ok)
	}
	// Resumed; it went live meanwhile: the replay says so.
	f.close()
	x.r.expect(t, "error closed", "reconnect after 43")
	f.accept()
	f.hello(60)
	f.send("%s", liveMsg(50))
	f.synced(61, true)
	x.r.expect(t, "source api live 50", "synced resumed")
	// A checkpoint again, then a new daemon run whose api source is live:
	// nothing said after synced, so live at the next message.
	f.send("%s", cpMsg(62, "2026-11-24T09:58:00Z", "48213"))
	x.r.expect(t, "source api checkpoint 2026-11-24T09:58:00Z 48213 62")
	cutAndFullState(f, 9000000)
	x.r.expect(t, "error closed", "reconnect after 62", "pods UPDATE file resync a", "synced state")
	if _, ok := x.c.SourceState("api"); !ok {
		t.Fatal("not kept until the next message")
	}
	f.send(`{"type":"sources_ready","seq":9000004,"sources":["api","file"]}`)
	x.r.expect(t, "source api live 0 resync", "ready api file")
	if _, ok := x.c.SourceState("api"); ok {
		t.Fatal("not live")
	}
	// A new run serving its checkpoint: said after synced.
	cutAndFullState(f, 9100000)
	f.send("%s", cpMsg(9100004, "2026-11-24T09:50:00Z", "48000"))
	x.r.expect(t, "error closed", "reconnect after 9000004", "synced state",
		"source api checkpoint 2026-11-24T09:50:00Z 48000 9100004")
	// Another run serving the same: not told again, and kept past the
	// message after it.
	cutAndFullState(f, 9200000)
	f.send("%s", cpMsg(9200004, "2026-11-24T09:50:00Z", "48000"))
	f.pods(9200005, "ADD", "file", podText("e", "default", "eps", "file", 1))
	x.r.expect(t, "error closed", "reconnect after 9100004", "synced state", "pods ADD file e")
	if st, ok := x.c.SourceState("api"); !ok || st.Seq != 9100004 {
		t.Fatalf("kept: %+v %v", st, ok)
	}
	// An unknown message type after synced ends the window too.
	cutAndFullState(f, 9300000)
	f.send(`{"type":"novel","seq":9300004}`)
	x.r.expect(t, "error closed", "reconnect after 9200005", "pods REMOVE file resync e", "synced state",
		"source api live 0 resync")
	if _, ok := x.c.SourceState("api"); ok {
		t.Fatal("not live")
	}
	x.r.none(t)
	x.r.checkModel(t, x.c)
}

// A bad source message says what is wrong with it (test_source_bad_message).
func TestSourceBadMessage(t *testing.T) {
	for _, c := range [][2]string{
		{`{"type":"source","seq":20,"source":"api"}`, `no "state"`},
		{`{"type":"source","seq":20,"state":"live"}`, `no "source"`},
		{`{"type":"source","seq":20,"source":"api","state":1}`, `"state" is not a string`},
		{`{"type":"source","seq":20,"source":"api","state":"checkpoint","checkpoint":1}`, `"checkpoint" is not an object`},
		{`{"type":"source","seq":20,"source":"api","state":"checkpoint","checkpoint":{"time":1}}`,
			`a member of "checkpoint" is not a string`},
		{`{"type":"source","seq":20,"source":"api","state":"checkpoint","checkpoint":{"resource_version":[]}}`,
			`a member of "checkpoint" is not a string`},
	} {
		f := newFake(t)
		x := start(t, Config{Path: f.path})
		begin(t, f)
		x.r.expect(t, "pods ADD api c", "pods ADD file a b", "synced state")
		f.send("%s", c[0])
		x.r.expect(t, "error bad message", "reconnect after 10")
		if e := x.r.lastErr(); !strings.Contains(e.Message, c[1]) {
			t.Fatalf("%s: %s", c[0], e.Message)
		}
		if _, ok := x.c.SourceState("api"); ok {
			t.Fatal("applied")
		}
	}
}
