package podmux

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"
)

// scenario is one of tests/fixtures/informer-scenarios.json (its comment
// says what each step does); the C and Python clients run the same table.
type scenario struct {
	Name  string `json:"name"`
	Steps []struct {
		AddHandler *string   `json:"add_handler"`
		Accept     *string   `json:"accept"`
		Send       []string  `json:"send"`
		Partial    *string   `json:"partial"`
		Close      bool      `json:"close"`
		Expect     *[]string `json:"expect"`
		Cache      *[]string `json:"cache"`
		HasSynced  bool      `json:"has_synced"`
		Index      [][]any   `json:"index"`
		Source     []*string `json:"source"`
	} `json:"steps"`
}

// hlog is the records of the scenario's event handlers.
type hlog struct {
	mu sync.Mutex
	v  []string
}

func (l *hlog) add(format string, args ...any) {
	l.mu.Lock()
	l.v = append(l.v, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *hlog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.v)
}

func (l *hlog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.v
	l.v = nil
	return v
}

// checkSourceState checks the table's [name, state, time, rv] against
// what the client says of the source now.
func checkSourceState(t *testing.T, where string, c *Client, want []*string) {
	str := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	st, notLive := c.SourceState(str(want[0]))
	if st.State != str(want[1]) || st.CheckpointTime != str(want[2]) ||
		st.CheckpointResourceVersion != str(want[3]) || notLive != (st.State != "live") {
		t.Fatalf("%s: source %+v, not live %v", where, st, notLive)
	}
}

func podGen(t *testing.T, p Pod) int {
	var v struct {
		Spec struct {
			Gen int `json:"gen"`
		} `json:"spec"`
	}
	if err := p.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v.Spec.Gen
}

// genKeys is the scenario table's custom index gen.
func genKeys(t *testing.T) IndexFunc {
	return func(p Pod) []string {
		n := podGen(t, p)
		var ks []string
		if n%2 == 1 {
			ks = append(ks, "odd")
		}
		if n < 4 {
			ks = append(ks, fmt.Sprintf("gen=%d", n))
		}
		return ks
	}
}

// seenKeys is the scenario table's custom index seen: the pod's
// kubernetes.io/config.seen annotation, if it has one.
func seenKeys(t *testing.T) IndexFunc {
	return func(p Pod) []string {
		var v struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if err := p.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if s := v.Metadata.Annotations["kubernetes.io/config.seen"]; s != "" {
			return []string{s}
		}
		return nil
	}
}

// inSourceIndex: whether the source index holds p (the indexes are in
// step with the cache when a handler is called).
func inSourceIndex(t *testing.T, c *Client, p Pod) bool {
	v, err := c.ByIndex(IndexSource, p.Source())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range v {
		if q.UID() == p.UID() {
			return true
		}
	}
	return false
}

func eventHandler(t *testing.T, c *Client, name string, l *hlog) EventHandler {
	return EventHandler{
		OnAdd: func(p Pod, initial bool) {
			if _, ok := c.PodByUID(p.UID()); !ok {
				t.Errorf("OnAdd before the cache holds %s", p.UID())
			}
			star := ""
			if initial {
				star = "*"
			}
			l.add("%s add%s %s/%s %d", name, star, p.Source(), p.UID(), podGen(t, p))
		},
		OnUpdate: func(old, p Pod) {
			if !inSourceIndex(t, c, p) {
				t.Errorf("OnUpdate: %s not in the source index", p)
			}
			l.add("%s update %s/%s %d>%d", name, p.Source(), p.UID(), podGen(t, old), podGen(t, p))
		},
		OnDelete: func(old Pod) {
			if inSourceIndex(t, c, old) {
				t.Errorf("OnDelete: %s still in the source index", old)
			}
			l.add("%s delete %s/%s %d", name, old.Source(), old.UID(), podGen(t, old))
		},
	}
}

func runScenario(t *testing.T, sc scenario) {
	f := newFake(t)
	l := &hlog{}
	x := start(t, Config{Path: f.path, Handlers: Handlers{Source: func(s SourceState) {
		resync := ""
		if s.Resync {
			resync = " resync"
		}
		l.add("source %s %s %d%s", s.Source, s.State, s.Seq, resync)
	}}})
	seq := uint64(100000)
	if err := x.c.AddIndex("gen", genKeys(t)); err != nil {
		t.Fatal(err)
	}
	if err := x.c.AddIndex("seen", seenKeys(t)); err != nil {
		t.Fatal(err)
	}
	for i, st := range sc.Steps {
		where := fmt.Sprintf("%s: step %d", sc.Name, i)
		if st.AddHandler != nil {
			x.c.AddEventHandler(eventHandler(t, x.c, *st.AddHandler, l))
		}
		if st.Accept != nil {
			f.accept()
			if f.first != *st.Accept {
				t.Fatalf("%s: first line %q", where, f.first)
			}
		}
		for _, line := range st.Send {
			f.send("%s", line)
		}
		if st.Partial != nil {
			f.write([]byte(*st.Partial))
			f.close()
		}
		if st.Close {
			f.close()
		}
		if st.Expect != nil {
			want := *st.Expect
			waitFor(t, where+": the records", func() bool { return l.len() >= len(want) })
			if have := l.take(); !reflect.DeepEqual(have, want) && !(len(have) == 0 && len(want) == 0) {
				t.Fatalf("%s: records\n%q\nwant\n%q", where, have, want)
			}
		}
		if st.Cache != nil {
			var have []string
			for _, p := range x.c.Pods() {
				have = append(have, fmt.Sprintf("%s/%s %d", p.Source(), p.UID(), podGen(t, p)))
			}
			if !reflect.DeepEqual(have, *st.Cache) || x.c.HasSynced() != st.HasSynced {
				t.Fatalf("%s: cache %q, has synced %v", where, have, x.c.HasSynced())
			}
		}
		if st.Source != nil {
			checkSourceState(t, where, x.c, st.Source)
		}
		for _, q := range st.Index {
			v, err := x.c.ByIndex(q[0].(string), q[1].(string))
			if err != nil {
				t.Fatal(err)
			}
			have := []any{}
			for _, p := range v {
				have = append(have, p.Source()+"/"+p.UID())
			}
			if !reflect.DeepEqual(have, q[2]) {
				t.Fatalf("%s: index %v %v: %q", where, q[0], q[1], have)
			}
			// AppendByIndex, after a pod of its caller's: the same pods.
			w, err := x.c.AppendByIndex([]Pod{{}}, q[0].(string), q[1].(string))
			have = []any{}
			for _, p := range w[1:] {
				have = append(have, p.Source()+"/"+p.UID())
			}
			if err != nil || !w[0].IsZero() || !reflect.DeepEqual(have, q[2]) {
				t.Fatalf("%s: AppendByIndex %v %v: %q, %v", where, q[0], q[1], have, err)
			}
		}
	}
	if f.cur != nil {
		// Everything sent has been handled: nothing more was handed on.
		f.barrier(x.r, seq)
	}
	if v := l.take(); len(v) != 0 {
		t.Fatalf("%s: records not expected %q", sc.Name, v)
	}
}

// TestInformerScenarios runs the shared scenario table of the
// informer-style handlers.
func TestInformerScenarios(t *testing.T) {
	b, err := os.ReadFile("../tests/fixtures/informer-scenarios.json")
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Scenarios []scenario `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &table); err != nil {
		t.Fatal(err)
	}
	for _, sc := range table.Scenarios {
		sc := sc
		t.Run(sc.Name, func(t *testing.T) { runScenario(t, sc) })
	}
}

// Index names: taken, or not added.
func TestIndexErrors(t *testing.T) {
	c := NewClient(Config{Path: "/nonexistent"})
	if err := c.AddIndex(IndexNamespace, func(Pod) []string { return nil }); !errors.Is(err, ErrIndex) {
		t.Fatalf("AddIndex of a built-in name: %v", err)
	}
	if _, err := c.ByIndex("nope", "x"); !errors.Is(err, ErrIndex) {
		t.Fatalf("ByIndex of no index: %v", err)
	}
	if v, err := c.ByIndex(IndexSource, "file"); err != nil || len(v) != 0 {
		t.Fatalf("empty: %v %v", v, err)
	}
	dst := []Pod{mkPod("u", "ns", "n", "file", 1)}
	if v, err := c.AppendByIndex(dst, "nope", "x"); !errors.Is(err, ErrIndex) || len(v) != 1 || v[0] != dst[0] {
		t.Fatalf("AppendByIndex of no index: %v %v", v, err)
	}
	if v, err := c.AppendByIndex(dst, IndexSource, "file"); err != nil || len(v) != 1 || v[0] != dst[0] {
		t.Fatalf("AppendByIndex, none found: %v %v", v, err)
	}
}

// AppendByIndex into a slice large enough allocates nothing: what it is
// for (scripts/bench --only client has its row).
func TestAppendByIndexReuses(t *testing.T) {
	c, nss := benchIndexClient(500)
	buf, err := c.AppendByIndex(nil, IndexNamespace, nss[0])
	if err != nil || len(buf) != 100 {
		t.Fatalf("%d pods, %v", len(buf), err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		buf, err = c.AppendByIndex(buf[:0], IndexNamespace, nss[len(nss)-1])
	})
	if err != nil || allocs != 0 || len(buf) != 100 || buf[0].Namespace() != nss[len(nss)-1] {
		t.Fatalf("%v allocations, %d pods, %v", allocs, len(buf), err)
	}
}
