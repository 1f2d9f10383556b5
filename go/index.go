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
// A built-in index is built by the first ByIndex that reads it (nil
// maps before), so a client that never reads it pays nothing.
type index struct {
	fn   IndexFunc
	pods map[string][]*pod
	keys map[*pod][]string
}

func newIndex(fn IndexFunc) *index {
	return &index{fn: fn}
}

// build fills the index from the cache (mu held for writing).
func (x *index) build(st *store) {
	x.pods, x.keys = map[string][]*pod{}, map[*pod][]string{}
	for _, p := range st.pods {
		x.put(p)
	}
}

// at is where p is or would go in v (sorted by comparePods).
func at(v []*pod, p *pod) int {
	return sort.Search(len(v), func(i int) bool { return comparePods(v[i], p) >= 0 })
}

func (x *index) put(p *pod) {
	ks := x.fn(Pod{p})
	if len(ks) == 0 {
		return
	}
	x.keys[p] = ks
	for _, k := range ks {
		v := x.pods[k]
		i := at(v, p)
		if i < len(v) && v[i] == p {
			continue // a key given twice
		}
		v = append(v, nil)
		copy(v[i+1:], v[i:])
		v[i] = p
		x.pods[k] = v
	}
}

func (x *index) drop(p *pod) {
	for _, k := range x.keys[p] {
		v := x.pods[k]
		i := at(v, p)
		if i >= len(v) || v[i] != p {
			continue // a key given twice: already out
		}
		copy(v[i:], v[i+1:])
		v[len(v)-1] = nil
		v = v[:len(v)-1]
		if len(v) == 0 {
			delete(x.pods, k)
		} else {
			x.pods[k] = v
		}
	}
	delete(x.keys, p)
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
// the daemon's order (namespace, name, UID, source); none is an empty
// slice.  An error matching ErrIndex if no such index was added.  Cost:
// O(k) for k pods found (kept in order, copied); the first read of a
// built-in index builds it, O(cache log k), and from then on it is kept
// in step like the others.
func (c *Client) ByIndex(name, key string) ([]Pod, error) {
	c.mu.RLock()
	x, ok := c.indexes[name]
	if ok && x.pods == nil {
		c.mu.RUnlock()
		c.mu.Lock()
		if x.pods == nil {
			x.build(c.st)
		}
		c.mu.Unlock()
		c.mu.RLock()
	}
	defer c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q: no such index", ErrIndex, name)
	}
	v := x.pods[key]
	return wrap(v), nil
}

func builtinIndexes() map[string]*index {
	return map[string]*index{
		IndexNamespace: newIndex(func(p Pod) []string { return []string{p.Namespace()} }),
		IndexSource:    newIndex(func(p Pod) []string { return []string{p.Source()} }),
	}
}
