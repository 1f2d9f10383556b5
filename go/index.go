package podmux

import (
	"errors"
	"fmt"
	"sort"
)

// IndexFunc gives a pod's keys in an index: zero or more.  It is called
// with the client's lock held: it must not call the client.
type IndexFunc func(p Pod) []string

// The built-in indexes: every client has them.
const (
	// IndexNamespace keys a pod by its namespace.
	IndexNamespace = "namespace"
	// IndexSource keys a pod by its source ("file", "http", "api").
	IndexSource = "source"
)

// ErrIndex is matched (errors.Is) by the error of AddIndex for a name
// taken and of ByIndex for a name not added.
var ErrIndex = errors.New("podmux: index")

// index is one index: its keys' pods, and each pod's keys (so a pod is
// taken out without calling fn again).  A key's pods are kept in the
// daemon's order (comparePods), so ByIndex copies them and sorts nothing:
// a change costs a binary search and a move within that key's slice.
// They are kept as the Pods ByIndex returns, so its copy is one
// allocation of the exact size and one copy, not a loop wrapping each.
// A built-in index is built by the first ByIndex that reads it (nil
// maps before), so a client that never reads it pays nothing.  A pod's
// keys are kept as the first and the others: most pods have one, and
// the slice fn returned is then not kept (one object fewer per pod for
// the collector to mark, which every allocation of ByIndex pays for).
//
// A built-in index has keyOf instead, the one key of a pod read from the
// pod itself: it keeps no keys at all, as it can read them again.
type index struct {
	fn    IndexFunc
	keyOf func(*pod) string
	pods  map[string][]Pod
	keys  map[*pod]podKeys
}

// podKeys is a pod's keys in an index: first, then more (nil for one).
type podKeys struct {
	first string
	more  []string
}

func newIndex(fn IndexFunc) *index {
	return &index{fn: fn}
}

// build fills the index from the cache (mu held for writing).
func (x *index) build(st *store) {
	x.pods, x.keys = map[string][]Pod{}, map[*pod]podKeys{}
	for _, p := range st.pods {
		x.put(p)
	}
}

// at is where p is or would go in v (sorted by comparePods).
func at(v []Pod, p *pod) int {
	return sort.Search(len(v), func(i int) bool { return comparePods(v[i].p, p) >= 0 })
}

func (x *index) put(p *pod) {
	if x.keyOf != nil {
		x.add(x.keyOf(p), p)
		return
	}
	ks := x.fn(Pod{p})
	if len(ks) == 0 {
		return
	}
	pk := podKeys{first: ks[0]}
	if len(ks) > 1 {
		pk.more = ks[1:]
	}
	x.keys[p] = pk
	for _, k := range ks {
		x.add(k, p)
	}
}

// add puts p among the pods of key k (once).
func (x *index) add(k string, p *pod) {
	v := x.pods[k]
	i := at(v, p)
	if i < len(v) && v[i].p == p {
		return // a key given twice
	}
	v = append(v, Pod{})
	copy(v[i+1:], v[i:])
	v[i] = Pod{p}
	x.pods[k] = v
}

func (x *index) drop(p *pod) {
	if x.keyOf != nil {
		x.remove(x.keyOf(p), p)
		return
	}
	pk, ok := x.keys[p]
	if !ok {
		return
	}
	x.remove(pk.first, p)
	for _, k := range pk.more {
		x.remove(k, p)
	}
	delete(x.keys, p)
}

// remove takes p out of the pods of key k.
func (x *index) remove(k string, p *pod) {
	v := x.pods[k]
	i := at(v, p)
	if i >= len(v) || v[i].p != p {
		return // a key given twice: already out
	}
	copy(v[i:], v[i+1:])
	v[len(v)-1] = Pod{}
	v = v[:len(v)-1]
	if len(v) == 0 {
		delete(x.pods, k)
	} else {
		x.pods[k] = v
	}
}

// indexWatch is the store's watch: every index follows each pod changed
// inside an apply, so the indexes are in step with the cache when the
// apply returns (before any handler is called).  Cost: per changed pod
// and key, a binary search and a move within that key's pods (the key's
// size, never the cache's).
func (c *Client) indexWatch(old, p *pod) {
	for _, x := range c.indexes {
		if x.pods == nil {
			continue // not built yet
		}
		if old != nil {
			x.drop(old)
		}
		if p != nil {
			x.put(p)
		}
	}
}

// AddIndex adds an index named name, keyed by fn (client-go's
// AddIndexers), built from the cache at once and kept in step with it
// from then on, inside each apply: a handler that reads an index sees
// the state after its change.  Safe from any goroutine (not from an
// IndexFunc).  An error matching ErrIndex if the name is taken (the
// built-in IndexNamespace and IndexSource among them).
func (c *Client) AddIndex(name string, fn IndexFunc) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.indexes[name]; ok {
		return fmt.Errorf("%w %q: already added", ErrIndex, name)
	}
	x := newIndex(fn)
	x.build(c.st)
	c.indexes[name] = x
	return nil
}

// ByIndex returns the pods whose keys in the index name include key, in
// the daemon's order (namespace, name, UID, source), in a new slice the
// caller owns; none is an empty slice.  An error matching ErrIndex if no
// such index was added.  Cost: O(k) for k pods found (kept in order,
// copied); the first read of a built-in index builds it, O(cache log k),
// and from then on it is kept in step like the others.  The copy is one
// allocation of the exact size, zeroed and then filled: the runtime
// zeroes all memory that holds pointers, and while the collector marks,
// copying pointers costs a barrier each (AppendByIndex into a slice
// reused does neither).
func (c *Client) ByIndex(name, key string) ([]Pod, error) {
	x, err := c.rlockIndex(name)
	if err != nil {
		return nil, err
	}
	// No defer: nothing below can panic, and the lookup is short enough
	// for its cost to show (scripts/bench --only client).
	v := x.pods[key]
	out := make([]Pod, len(v))
	copy(out, v)
	c.mu.RUnlock()
	return out, nil
}

// AppendByIndex appends the pods ByIndex(name, key) would return to dst
// and returns the extended slice, as strconv.AppendInt does; dst is
// returned unchanged with the error.  A caller that looks up often and
// passes the last result cut to length 0 allocates nothing once its
// slice is large enough: O(k) for k pods found, a copy.  The slots past
// the new length keep the pods they held (alive) until overwritten.
func (c *Client) AppendByIndex(dst []Pod, name, key string) ([]Pod, error) {
	x, err := c.rlockIndex(name)
	if err != nil {
		return dst, err
	}
	dst = append(dst, x.pods[key]...)
	c.mu.RUnlock()
	return dst, nil
}

// rlockIndex returns the index name with mu held for reading (the
// caller unlocks it), built first if it is a built-in one not built yet;
// on an error mu is not held.
func (c *Client) rlockIndex(name string) (*index, error) {
	var x *index
	c.mu.RLock()
	switch name {
	case IndexNamespace:
		x = c.nsIndex
	case IndexSource:
		x = c.srcIndex
	default:
		x = c.indexes[name]
	}
	if x == nil {
		c.mu.RUnlock()
		return nil, fmt.Errorf("%w %q: no such index", ErrIndex, name)
	}
	if x.pods == nil {
		c.mu.RUnlock()
		c.mu.Lock()
		if x.pods == nil {
			x.build(c.st)
		}
		c.mu.Unlock()
		c.mu.RLock()
	}
	return x, nil
}

func builtinIndexes() map[string]*index {
	return map[string]*index{
		IndexNamespace: {keyOf: func(p *pod) string { return p.namespace }},
		IndexSource:    {keyOf: func(p *pod) string { return p.source }},
	}
}
