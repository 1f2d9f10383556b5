package podmux

// store: the client's copy of the daemon's merged pods and registered
// plugins, and the ops of protocol 1 applied to it.  No I/O, no locking,
// no handlers: the client guards it and tells its users.
//
// A pod is its source and UID (doc/protocol.md): the store holds one pod
// per source and UID, and an upsert of a pod under another namespace or
// name replaces the one held.  Layout, as in the C library
// (src/client/client_cache.c): the pods in one slice sorted by
// comparePods (namespace, name, UID, source), plus a map by UID (that
// finds a source and UID).  Costs: a lookup by UID O(1), by name or namespace
// O(log n); an insert or remove O(log n) plus a copy of the slice's tail
// (microseconds at 10,000 pods); a SET O(n) when it comes sorted (the
// daemon sorts it), O(n log n) otherwise.
//
// Every pod that changes inside an apply is reported to watch (when set)
// as old and new (nil for an added or a removed pod), in the apply: an
// index kept from watch is in step with the pods when the apply returns.

import (
	"sort"
)

type uidSlot struct {
	first *pod
	more  []*pod // other sources holding the same UID (rare)
}

type store struct {
	pods    []*pod
	byUID   map[string]uidSlot
	plugins []Plugin // sorted by Socket
	watch   func(old, new *pod)
	// held: the pods held over after a daemon restart (doc/protocol.md,
	// "A restarted daemon's late sources"), by key.  Any change that
	// replaces or removes one ends its hold-over.
	held map[podKey]*pod
}

func newStore() *store {
	return &store{byUID: make(map[string]uidSlot)}
}

// find returns the position of the pod with p's key, or where it would
// go (found false).
func (s *store) find(p *pod) (int, bool) {
	i := sort.Search(len(s.pods), func(i int) bool { return comparePods(s.pods[i], p) >= 0 })
	return i, i < len(s.pods) && comparePods(s.pods[i], p) == 0
}

// get returns the pod of this source and UID, or nil.  O(1).
func (s *store) get(source, uid string) *pod {
	slot, ok := s.byUID[uid]
	if !ok {
		return nil
	}
	if slot.first.source == source {
		return slot.first
	}
	for _, p := range slot.more {
		if p.source == source {
			return p
		}
	}
	return nil
}

func (s *store) uidAdd(p *pod) {
	slot, ok := s.byUID[p.uid]
	if !ok {
		s.byUID[p.uid] = uidSlot{first: p}
		return
	}
	slot.more = append(slot.more, p)
	s.byUID[p.uid] = slot
}

func (s *store) uidRemove(p *pod) {
	slot := s.byUID[p.uid]
	if slot.first == p {
		if len(slot.more) == 0 {
			delete(s.byUID, p.uid)
			return
		}
		slot.first = slot.more[len(slot.more)-1]
		slot.more = slot.more[:len(slot.more)-1]
		s.byUID[p.uid] = slot
		return
	}
	for i, q := range slot.more {
		if q == p {
			slot.more = append(slot.more[:i], slot.more[i+1:]...)
			s.byUID[p.uid] = slot
			return
		}
	}
}

// uidReplace puts p in old's place (same key, so same UID).
func (s *store) uidReplace(old, p *pod) {
	slot := s.byUID[p.uid]
	if slot.first == old {
		slot.first = p
		s.byUID[p.uid] = slot
		return
	}
	for i, q := range slot.more {
		if q == old {
			slot.more[i] = p
			return
		}
	}
}

func (s *store) changed(old, p *pod) {
	if s.watch != nil {
		s.watch(old, p)
	}
}

// applyPods applies a "pods" message.  A pod twice in one message: the
// later wins, as a later message would.
func (s *store) applyPods(m *message) {
	if m.op == OpSet {
		s.replacePods(sortedPods(m.pods))
		return
	}
	for _, pp := range m.pods {
		p := pp.p
		old := s.get(p.source, p.uid)
		delete(s.held, podKey{p.source, p.uid})
		switch {
		case m.op == OpRemove:
			if old != nil {
				s.removeAt(old)
				s.changed(old, nil)
			}
		case old != nil && comparePods(old, p) == 0:
			pos, _ := s.find(old)
			s.pods[pos] = p
			s.uidReplace(old, p)
			s.changed(old, p)
		default:
			// New, or renamed with its UID kept: it moves to its place.
			if old != nil {
				s.removeAt(old)
			}
			pos, _ := s.find(p)
			s.pods = append(s.pods, nil)
			copy(s.pods[pos+1:], s.pods[pos:])
			s.pods[pos] = p
			s.uidAdd(p)
			s.changed(old, p)
		}
	}
}

// removeAt takes old (held) out of the slice and the UID map.
func (s *store) removeAt(old *pod) {
	pos, found := s.find(old)
	if !found {
		return
	}
	s.uidRemove(old)
	copy(s.pods[pos:], s.pods[pos+1:])
	s.pods[len(s.pods)-1] = nil
	s.pods = s.pods[:len(s.pods)-1]
}

type podKey struct{ source, uid string }

// sortedPods is the pods of a SET in the cache's order, one per source
// and UID (the last of a source and UID wins), and their UID map.  O(n)
// when they come sorted and each source and UID once (the daemon's SET),
// O(n log n) otherwise.
func sortedPods(pods []Pod) ([]*pod, map[string]uidSlot) {
	v := make([]*pod, len(pods))
	byUID := make(map[string]uidSlot, len(pods))
	simple := true
	for i, p := range pods {
		v[i] = p.p
		if i > 0 && comparePods(v[i-1], v[i]) >= 0 {
			simple = false
		}
		if simple {
			slot, held := byUID[p.p.uid]
			if held && (slot.first.source == p.p.source || containsSource(slot.more, p.p.source)) {
				simple = false
			} else if held {
				slot.more = append(slot.more, p.p)
				byUID[p.p.uid] = slot
			} else {
				byUID[p.p.uid] = uidSlot{first: p.p}
			}
		}
	}
	if simple {
		return v, byUID
	}
	last := make(map[podKey]int, len(v))
	for i, p := range v {
		last[podKey{p.source, p.uid}] = i
	}
	n := 0
	for i, p := range v {
		if last[podKey{p.source, p.uid}] == i {
			v[n] = p
			n++
		}
	}
	for i := n; i < len(v); i++ {
		v[i] = nil
	}
	v = v[:n]
	// Keys are unique now, and so are places in the order.
	sort.Slice(v, func(i, j int) bool { return comparePods(v[i], v[j]) < 0 })
	byUID = make(map[string]uidSlot, len(v))
	for _, p := range v {
		slot, held := byUID[p.uid]
		if held {
			slot.more = append(slot.more, p)
		} else {
			slot.first = p
		}
		byUID[p.uid] = slot
	}
	return v, byUID
}

func containsSource(v []*pod, source string) bool {
	for _, p := range v {
		if p.source == source {
			return true
		}
	}
	return false
}

// replacePods makes pods (sorted, one per source and UID) the pods held,
// with their UID map; the plugins stay.
func (s *store) replacePods(pods []*pod, byUID map[string]uidSlot) {
	if s.watch != nil {
		mergeWalk(s.pods, pods, func(old, p *pod) {
			if old != p {
				s.watch(old, p)
			}
		})
	}
	s.pods = pods
	s.byUID = byUID
	s.held = nil
}

// mergeWalk walks two sorted slices of pods together: fn(old, nil) for
// a pod only in a, fn(nil, new) for one only in b, fn(old, new) for one
// in both.  O(len(a) + len(b)).
func mergeWalk(a, b []*pod, fn func(old, p *pod)) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		c := 0
		switch {
		case i >= len(a):
			c = 1
		case j >= len(b):
			c = -1
		default:
			c = comparePods(a[i], b[j])
		}
		switch {
		case c < 0:
			fn(a[i], nil)
			i++
		case c > 0:
			fn(nil, b[j])
			j++
		default:
			fn(a[i], b[j])
			i++
			j++
		}
	}
}

func (s *store) findPlugin(socket string) (int, bool) {
	i := sort.Search(len(s.plugins), func(i int) bool { return s.plugins[i].Socket >= socket })
	return i, i < len(s.plugins) && s.plugins[i].Socket == socket
}

// applyPlugin applies a plugin message: REGISTERED adds or replaces,
// DEREGISTERED removes; FAILED (news, not state) and ops not known
// change nothing.
func (s *store) applyPlugin(m *message) {
	pos, found := s.findPlugin(m.plugin.Socket)
	switch m.pluginOp {
	case PluginDeregistered:
		if found {
			s.plugins = append(s.plugins[:pos], s.plugins[pos+1:]...)
		}
	case PluginRegistered:
		if found {
			s.plugins[pos] = m.plugin
			return
		}
		s.plugins = append(s.plugins, Plugin{})
		copy(s.plugins[pos+1:], s.plugins[pos:])
		s.plugins[pos] = m.plugin
	}
}

// podByUID is the pod with this UID (the first in the cache's order if
// several sources hold it).
func (s *store) podByUID(uid string) *pod {
	slot, ok := s.byUID[uid]
	if !ok {
		return nil
	}
	best := slot.first
	for _, p := range slot.more {
		if comparePods(p, best) < 0 {
			best = p
		}
	}
	return best
}

// nsRange is the positions [i, j) of the pods of namespace ns.
func (s *store) nsRange(ns string) (int, int) {
	i := sort.Search(len(s.pods), func(i int) bool { return s.pods[i].namespace >= ns })
	j := i + sort.Search(len(s.pods)-i, func(k int) bool { return s.pods[i+k].namespace > ns })
	return i, j
}

// podByName is the pod namespace/name (the first in the cache's order if
// several sources hold one).
func (s *store) podByName(ns, name string) *pod {
	i := sort.Search(len(s.pods), func(i int) bool {
		p := s.pods[i]
		return p.namespace > ns || (p.namespace == ns && p.name >= name)
	})
	if i < len(s.pods) && s.pods[i].namespace == ns && s.pods[i].name == name {
		return s.pods[i]
	}
	return nil
}

// record is one computed resync record.
type record struct {
	op     Op
	source string
	pods   []Pod
}

// pluginChange is one computed plugin event.
type pluginChange struct {
	op     string
	plugin Plugin
}

// diff is the difference from s to fresh, pods matched by source and
// UID: per source (in byte order) REMOVE, ADD and UPDATE records, pods in
// the cache's order, a pod the same by samePod (a restart's new
// config.seen, say) left out; then the plugins,
// by socket: REGISTERED for a new or changed one, DEREGISTERED for a
// gone one.  O(n) besides the comparisons of pods whose text differs.
func (s *store) diff(fresh *store) ([]record, []pluginChange) {
	type change struct {
		op Op
		p  *pod
	}
	var changes []change
	// A pod is its source and UID: one that moved in the order (renamed,
	// its UID kept) is found by key on the other side and compared.
	mergeWalk(s.pods, fresh.pods, func(old, p *pod) {
		switch {
		case p == nil:
			if fresh.get(old.source, old.uid) == nil {
				changes = append(changes, change{OpRemove, old})
			}
			return
		case old == nil:
			old = s.get(p.source, p.uid)
		}
		switch {
		case old == nil:
			changes = append(changes, change{OpAdd, p})
		case !samePod(old.text, p.text):
			changes = append(changes, change{OpUpdate, p})
		}
	})
	var sources []string
	seen := map[string]bool{}
	for _, c := range changes {
		if !seen[c.p.source] {
			seen[c.p.source] = true
			sources = append(sources, c.p.source)
		}
	}
	sort.Strings(sources)
	var recs []record
	for _, src := range sources {
		for _, op := range [...]Op{OpRemove, OpAdd, OpUpdate} {
			var pods []Pod
			for _, c := range changes {
				if c.op == op && c.p.source == src {
					pods = append(pods, Pod{c.p})
				}
			}
			if len(pods) > 0 {
				recs = append(recs, record{op: op, source: src, pods: pods})
			}
		}
	}
	return recs, diffPlugins(s.plugins, fresh.plugins)
}

func diffPlugins(a, b []Plugin) []pluginChange {
	var out []pluginChange
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i].Socket < b[j].Socket):
			out = append(out, pluginChange{PluginDeregistered, a[i]})
			i++
		case i >= len(a) || a[i].Socket > b[j].Socket:
			out = append(out, pluginChange{PluginRegistered, b[j]})
			j++
		default:
			if a[i].JSON != b[j].JSON {
				out = append(out, pluginChange{PluginRegistered, b[j]})
			}
			i++
			j++
		}
	}
	return out
}

// replace makes fresh's pods, held pods and plugins the store's (watch
// told).
func (s *store) replace(fresh *store) {
	s.replacePods(fresh.pods, fresh.byUID)
	s.held = fresh.held
	s.plugins = fresh.plugins
}

// holdOver puts into s (a full state being built, which holds no pod of
// these sources) the pods of old whose source is not delivered, held
// over.  O(n): one merge of two sorted slices.
func (s *store) holdOver(old *store, delivered map[string]bool) {
	var keep []*pod
	for _, p := range old.pods {
		if !delivered[p.source] {
			keep = append(keep, p)
		}
	}
	if len(keep) == 0 {
		return
	}
	merged := make([]*pod, 0, len(s.pods)+len(keep))
	mergeWalk(s.pods, keep, func(a, b *pod) {
		if a != nil {
			merged = append(merged, a)
		}
		if b != nil && b != a {
			merged = append(merged, b)
		}
	})
	s.pods = merged
	s.held = make(map[podKey]*pod, len(keep))
	for _, p := range keep {
		s.uidAdd(p)
		s.held[podKey{p.source, p.uid}] = p
	}
}

// isHeld: p is a pod held over.
func (s *store) isHeld(p *pod) bool {
	return p != nil && s.held[podKey{p.source, p.uid}] == p
}

// setKeepingHeld applies a SET that keeps the held pods it does not carry
// (of a source and UID, the SET's wins).
func (s *store) setKeepingHeld(m *message) {
	held := s.held
	all := make([]Pod, 0, len(held)+len(m.pods))
	for _, p := range s.pods {
		if s.isHeld(p) {
			all = append(all, Pod{p})
		}
	}
	s.replacePods(sortedPods(append(all, m.pods...)))
	for k, p := range held {
		if s.get(k.source, k.uid) == p {
			if s.held == nil {
				s.held = map[podKey]*pod{}
			}
			s.held[k] = p
		}
	}
}

// dropHeld takes the held pods out: REMOVE records per source (in byte
// order), pods in the cache's order.  O(n).
func (s *store) dropHeld() []record {
	bySource := map[string][]Pod{}
	var sources []string
	n := 0
	for _, p := range s.pods {
		if !s.isHeld(p) {
			s.pods[n] = p
			n++
			continue
		}
		if bySource[p.source] == nil {
			sources = append(sources, p.source)
		}
		bySource[p.source] = append(bySource[p.source], Pod{p})
		s.uidRemove(p)
		s.changed(p, nil)
	}
	for i := n; i < len(s.pods); i++ {
		s.pods[i] = nil
	}
	s.pods = s.pods[:n]
	s.held = nil
	sort.Strings(sources)
	var recs []record
	for _, src := range sources {
		recs = append(recs, record{op: OpRemove, source: src, pods: bySource[src]})
	}
	return recs
}
