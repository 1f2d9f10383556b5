package podmux

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

func mkPod(uid, ns, name, src string, gen int) Pod {
	m, err := parseLine([]byte(`{"type":"pods","seq":1,"op":"ADD","source":"` + src + `","pods":[` +
		podText(uid, ns, name, src, gen) + `]}`))
	if err != nil {
		panic(err)
	}
	return m.pods[0]
}

func msg(op Op, pods ...Pod) *message {
	return &message{typ: msgPods, op: op, source: "file", pods: pods}
}

// An index kept from the store's watch is in step with the pods after
// every apply, whatever the ops: what the informer-style indexes will be
// built on.
func TestStoreWatchKeepsAnIndex(t *testing.T) {
	st := newStore()
	index := map[string]map[*pod]bool{} // namespace -> pods
	st.watch = func(old, p *pod) {
		if old != nil {
			delete(index[old.namespace], old)
		}
		if p != nil {
			if index[p.namespace] == nil {
				index[p.namespace] = map[*pod]bool{}
			}
			index[p.namespace][p] = true
		}
	}
	check := func(step int) {
		t.Helper()
		want := map[string][]*pod{}
		for _, p := range st.pods {
			want[p.namespace] = append(want[p.namespace], p)
		}
		for ns, set := range index {
			if len(set) != len(want[ns]) {
				t.Fatalf("step %d: namespace %s: index %d pods, cache %d", step, ns, len(set), len(want[ns]))
			}
			for _, p := range want[ns] {
				if !set[p] {
					t.Fatalf("step %d: %s not in the index", step, Pod{p})
				}
			}
		}
		checkStore(t, st)
	}
	rng := rand.New(rand.NewSource(1))
	pick := func(gen int) Pod {
		i := rng.Intn(30)
		return mkPod(fmt.Sprintf("u%d", i%20), fmt.Sprintf("ns%d", i%3), fmt.Sprintf("p%d", i), []string{"file", "api"}[i%2], gen)
	}
	for step := 0; step < 2000; step++ {
		var pods []Pod
		for k := rng.Intn(4); k >= 0; k-- {
			pods = append(pods, pick(step))
		}
		r := rng.Intn(10)
		switch {
		case r == 0:
			st.applyPods(msg(OpSet, pods...))
		case r == 1:
			fresh := newStore()
			fresh.applyPods(msg(OpSet, pods...))
			st.replace(fresh)
		case r < 5:
			st.applyPods(msg(OpRemove, pods...))
		default:
			st.applyPods(msg(Op([]Op{OpAdd, OpUpdate, OpDelete, OpReconcile}[r%4]), pods...))
		}
		check(step)
	}
}

// An index follows the store's watch through every op and keeps each
// key's pods in the daemon's order, a pod in a key once even when its
// IndexFunc gives that key twice: ByIndex hands them out as they are.
func TestIndexKeepsKeysInOrder(t *testing.T) {
	st := newStore()
	x := newIndex(func(p Pod) []string {
		// Two keys, the second sometimes the first again.
		return []string{p.Namespace(), []string{"s-" + p.Source(), p.Namespace()}[len(p.Name())%2]}
	})
	x.build(st)
	st.watch = func(old, p *pod) {
		if old != nil {
			x.drop(old)
		}
		if p != nil {
			x.put(p)
		}
	}
	rng := rand.New(rand.NewSource(2))
	for step := 0; step < 2000; step++ {
		var pods []Pod
		for k := rng.Intn(4); k >= 0; k-- {
			i := rng.Intn(40)
			pods = append(pods, mkPod(fmt.Sprintf("u%d", i%25), fmt.Sprintf("ns%d", i%3),
				fmt.Sprintf("p%d", i*7%40), []string{"file", "api"}[i%2], step))
		}
		r := rng.Intn(10)
		switch {
		case r == 0:
			st.applyPods(msg(OpSet, pods...))
		case r < 4:
			st.applyPods(msg(OpRemove, pods...))
		default:
			st.applyPods(msg(Op([]Op{OpAdd, OpUpdate, OpDelete, OpReconcile}[r%4]), pods...))
		}
		want := map[string][]*pod{}
		for _, p := range st.pods {
			seen := map[string]bool{}
			for _, k := range x.fn(Pod{p}) {
				if !seen[k] {
					seen[k] = true
					want[k] = append(want[k], p)
				}
			}
		}
		if len(want) != len(x.pods) {
			t.Fatalf("step %d: %d keys, want %d", step, len(x.pods), len(want))
		}
		for k, w := range want {
			sort.Slice(w, func(i, j int) bool { return comparePods(w[i], w[j]) < 0 })
			got := x.pods[k]
			if len(got) != len(w) {
				t.Fatalf("step %d: key %s: %d pods, want %d", step, k, len(got), len(w))
			}
			for i := range w {
				if got[i].p != w[i] {
					t.Fatalf("step %d: key %s: pod %d is %s, want %s", step, k, i, got[i], Pod{w[i]})
				}
			}
		}
	}
}

func TestStoreSameUIDInTwoSources(t *testing.T) {
	st := newStore()
	a := mkPod("u", "ns", "a", "file", 1)
	b := mkPod("u", "ns", "a", "api", 1)
	c := mkPod("u", "ns", "b", "http", 1)
	st.applyPods(msg(OpAdd, c, a, b))
	if got := (Pod{st.podByUID("u")}); got.Source() != "api" {
		t.Fatalf("by uid: %s", got)
	}
	st.applyPods(msg(OpRemove, b))
	if got := (Pod{st.podByUID("u")}); got.Source() != "file" {
		t.Fatalf("by uid: %s", got)
	}
	a2 := mkPod("u", "ns", "a", "file", 2)
	st.applyPods(msg(OpUpdate, a2))
	if got := (Pod{st.podByUID("u")}); got.JSON() != a2.JSON() {
		t.Fatalf("by uid: %s", got.JSON())
	}
	c2 := mkPod("u", "ns", "b", "http", 2)
	st.applyPods(msg(OpUpdate, c2))
	st.applyPods(msg(OpRemove, a2))
	if got := (Pod{st.podByUID("u")}); got.JSON() != c2.JSON() {
		t.Fatalf("by uid: %s", got.JSON())
	}
	checkStore(t, st)
}

func TestStoreDiffOrder(t *testing.T) {
	old, fresh := newStore(), newStore()
	old.applyPods(msg(OpSet, mkPod("a", "x", "a", "file", 1), mkPod("b", "x", "b", "api", 1), mkPod("c", "y", "c", "file", 1),
		mkPod("d", "y", "d", "http", 1)))
	fresh.applyPods(msg(OpSet, mkPod("a", "x", "a", "file", 2), mkPod("b", "x", "b", "api", 1), mkPod("e", "a", "e", "file", 1),
		mkPod("f", "z", "f", "api", 1), mkPod("g", "b", "g", "file", 1)))
	old.plugins = []Plugin{{Socket: "/a", JSON: "1"}, {Socket: "/b", JSON: "1"}, {Socket: "/d", JSON: "1"}}
	fresh.plugins = []Plugin{{Socket: "/a", JSON: "1"}, {Socket: "/b", JSON: "2"}, {Socket: "/c", JSON: "1"}}
	recs, plugins := old.diff(fresh)
	var got []string
	for _, r := range recs {
		var uids []string
		for _, p := range r.pods {
			uids = append(uids, p.UID())
		}
		got = append(got, r.op.String()+" "+r.source+" "+strings.Join(uids, ","))
	}
	for _, p := range plugins {
		got = append(got, p.op+" "+p.plugin.Socket)
	}
	want := []string{"ADD api f", "REMOVE file c", "ADD file e,g", "UPDATE file a", "REMOVE http d",
		"REGISTERED /b", "REGISTERED /c", "DEREGISTERED /d"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("diff:\n%s", strings.Join(got, "\n"))
	}
}

// A pod is its source and UID: an upsert under another name or
// namespace replaces it (no second entry, told to watch as one change), a
// REMOVE finds it whatever name it carries, a SET keeps the last of a
// source and UID, and the diff matches a renamed pod as an UPDATE.
func TestStoreRenamedSameUID(t *testing.T) {
	st := newStore()
	var told []string
	st.watch = func(old, p *pod) {
		s := "nil"
		if old != nil {
			s = old.name
		}
		if p != nil {
			s += "->" + p.name
		} else {
			s += "->nil"
		}
		told = append(told, s)
	}
	st.applyPods(msg(OpAdd, mkPod("a", "ns", "alpha", "file", 1), mkPod("b", "ns", "beta", "file", 1)))
	st.applyPods(msg(OpUpdate, mkPod("a", "other", "zeta", "file", 2)))
	if len(st.pods) != 2 || st.podByName("ns", "alpha") != nil || st.podByName("other", "zeta") == nil {
		t.Fatalf("after the rename: %v", wrap(st.pods))
	}
	checkStore(t, st)
	st.applyPods(msg(OpRemove, mkPod("a", "ns", "old-name", "file", 1)))
	if len(st.pods) != 1 || st.podByUID("a") != nil {
		t.Fatalf("after the REMOVE: %v", wrap(st.pods))
	}
	if got := strings.Join(told, " "); got != "nil->alpha nil->beta alpha->zeta zeta->nil" {
		t.Fatalf("watch told %s", got)
	}
	st.applyPods(msg(OpSet, mkPod("x", "ns", "one", "file", 1), mkPod("y", "ns", "aaa", "file", 1),
		mkPod("x", "ns", "two", "file", 2)))
	if len(st.pods) != 2 || st.podByUID("x").name != "two" || st.podByName("ns", "one") != nil {
		t.Fatalf("after the SET: %v", wrap(st.pods))
	}
	checkStore(t, st)
	fresh := newStore()
	fresh.applyPods(msg(OpSet, mkPod("x", "ns", "three", "file", 2), mkPod("y", "ns", "aaa", "file", 1)))
	recs, _ := st.diff(fresh)
	if len(recs) != 1 || recs[0].op != OpUpdate || len(recs[0].pods) != 1 || recs[0].pods[0].Name() != "three" {
		t.Fatalf("diff: %+v", recs)
	}
}

func TestSortedPods(t *testing.T) {
	var pods []Pod
	for i := 0; i < 50; i++ {
		pods = append(pods, mkPod(fmt.Sprintf("u%02d", (i*7)%20), "ns", fmt.Sprintf("n%02d", (i*7)%20), "file", i))
	}
	v, _ := sortedPods(pods)
	if len(v) != 20 || !sort.SliceIsSorted(v, func(i, j int) bool { return comparePods(v[i], v[j]) < 0 }) {
		t.Fatalf("%d pods", len(v))
	}
	// The last of equal pods wins: u00 came at i = 0, 20, 40.
	if !strings.Contains(v[0].text, `"gen":40`) {
		t.Fatal(v[0].text)
	}
}

// The built-in indexes, which read a pod's one key from the pod and keep
// no keys of their own, follow every op as a walk of the cache says:
// pods moving between namespaces and sources, removed, replaced by SETs.
func TestBuiltinIndexesFollowOps(t *testing.T) {
	c := NewClient(Config{})
	if _, err := c.ByIndex(IndexNamespace, "ns0"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ByIndex(IndexSource, "file"); err != nil {
		t.Fatal(err)
	}
	head := mkPod("h", "ns9", "head", "file", 0)
	reuse := []Pod{head}
	rng := rand.New(rand.NewSource(3))
	for step := 0; step < 2000; step++ {
		var pods []Pod
		for k := rng.Intn(4); k >= 0; k-- {
			i := rng.Intn(40)
			pods = append(pods, mkPod(fmt.Sprintf("u%d", i%25), fmt.Sprintf("ns%d", rng.Intn(3)),
				fmt.Sprintf("p%d", i*7%40), []string{"file", "api"}[rng.Intn(2)], step))
		}
		r := rng.Intn(10)
		c.mu.Lock()
		switch {
		case r == 0:
			c.st.applyPods(msg(OpSet, pods...))
		case r < 4:
			c.st.applyPods(msg(OpRemove, pods...))
		default:
			c.st.applyPods(msg(Op([]Op{OpAdd, OpUpdate, OpDelete, OpReconcile}[r%4]), pods...))
		}
		c.mu.Unlock()
		for _, q := range []struct {
			index string
			keys  []string
			key   func(Pod) string
		}{
			{IndexNamespace, []string{"ns0", "ns1", "ns2"}, Pod.Namespace},
			{IndexSource, []string{"file", "api"}, Pod.Source},
		} {
			for _, k := range q.keys {
				var want []string
				for _, p := range c.Pods() {
					if q.key(p) == k {
						want = append(want, p.String())
					}
				}
				v, err := c.ByIndex(q.index, k)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, p := range v {
					got = append(got, p.String())
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("step %d: %s %q: %v, want %v", step, q.index, k, got, want)
				}
				// AppendByIndex into a slice reused from the last
				// lookup, after a pod kept at its head: the same pods,
				// none left over from the last lookup.
				if reuse, err = c.AppendByIndex(reuse[:1], q.index, k); err != nil {
					t.Fatal(err)
				}
				got = got[:0]
				for _, p := range reuse[1:] {
					got = append(got, p.String())
				}
				if reuse[0] != head || strings.Join(got, " ") != strings.Join(want, " ") {
					t.Fatalf("step %d: AppendByIndex %s %q: %v after %v, want %v", step, q.index, k, got, reuse[0], want)
				}
			}
		}
	}
}
