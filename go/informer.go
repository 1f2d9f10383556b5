package podmux

import (
	"sort"
	"sync"
)

// EventHandler is an informer-style handler, in the manner of client-go's
// ResourceEventHandlerFuncs; a nil member is not called.  Add it with
// Client.AddEventHandler.  The ops of an Update map to it pod by pod (a
// pod is its source and UID):
//
//   - ADD: OnAdd(pod, false); OnUpdate(old, pod) if the handlers were
//     given that pod already.
//   - UPDATE, RECONCILE, DELETE: OnUpdate(old, pod), old being the pod last
//     given to the handlers (a graceful DELETE is an update that sets
//     deletionTimestamp); OnAdd(pod, false) for a pod not given yet.
//   - REMOVE: OnDelete(old); nothing for a pod not given.
//   - SET (the snapshot modes, and the SET of source "*" after
//     Config.Resume): diffed against the pods given, matched by source and
//     UID: OnDelete for each pod it lacks, in the cache's order; then for
//     each of its pods in order OnAdd, or OnUpdate when the two texts
//     differ by the rule of "Which pods changed" (doc/protocol.md), or
//     nothing.
//
// The updates computed after a full state and for held-over pods map the
// same way, so a failed resume or a daemon restart reaches the handlers as
// the difference only.
type EventHandler struct {
	// OnAdd: initial is true for the pods the cache held when the handler
	// was added (client-go's isInInitialList).
	OnAdd    func(pod Pod, initial bool)
	OnUpdate func(old, pod Pod)
	OnDelete func(old Pod)
}

// informer turns the updates into EventHandler calls.  Its map of the
// pods given to the handlers is built from the cache by the first
// AddEventHandler (nil before: a client without event handlers pays
// nothing) and follows the updates from then on.  An update whose change
// the cache already held when the map was built finds the same pods there
// and calls nothing.  Cost: O(pods in the update); a SET O(cache).
type informer struct {
	mu   sync.Mutex // held while handlers are called
	ehs  []EventHandler
	seen map[podKey]Pod
}

// AddEventHandler adds an informer-style handler (see EventHandler).  A
// client has any number; each is called for every change, in the order
// they were added, after Handlers.Pods, once the cache holds the change,
// on Run's goroutine.  The handler is first given each pod handed on so
// far (the cache, for the first one), in the cache's order, as
// OnAdd(pod, true): on the calling
// goroutine, before any later change.  Safe from any goroutine, but not
// from a handler of the same client (it would wait for itself).
func (c *Client) AddEventHandler(h EventHandler) {
	inf := &c.inf
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.seen == nil {
		c.mu.RLock()
		inf.seen = make(map[podKey]Pod, len(c.st.pods))
		for _, p := range c.st.pods {
			inf.seen[podKey{p.source, p.uid}] = Pod{p}
		}
		c.mu.RUnlock()
	}
	inf.ehs = append(inf.ehs, h)
	if h.OnAdd == nil {
		return
	}
	v := make([]*pod, 0, len(inf.seen))
	for _, p := range inf.seen {
		v = append(v, p.p)
	}
	sort.Slice(v, func(i, j int) bool { return comparePods(v[i], v[j]) < 0 })
	for _, p := range v {
		h.OnAdd(Pod{p}, true)
	}
}

func (c *Client) callAdd(p Pod) {
	for _, h := range c.inf.ehs {
		if h.OnAdd != nil && !c.stopping() {
			h.OnAdd(p, false)
		}
	}
}

func (c *Client) callUpdate(old, p Pod) {
	for _, h := range c.inf.ehs {
		if h.OnUpdate != nil && !c.stopping() {
			h.OnUpdate(old, p)
		}
	}
}

func (c *Client) callDelete(old Pod) {
	for _, h := range c.inf.ehs {
		if h.OnDelete != nil && !c.stopping() {
			h.OnDelete(old)
		}
	}
}

func (c *Client) upsert(p Pod, quiet bool) {
	k := podKey{p.p.source, p.p.uid}
	old, ok := c.inf.seen[k]
	c.inf.seen[k] = p
	switch {
	case ok && old.p == p.p:
		// Given already (the map was built after the cache took it).
	case !ok:
		c.callAdd(p)
	case !quiet || !samePod(old.p.text, p.p.text):
		c.callUpdate(old, p)
	}
}

// follow hands one update to the event handlers (the map follows it even
// when the client is stopping).
func (c *Client) follow(u Update) {
	inf := &c.inf
	inf.mu.Lock()
	defer inf.mu.Unlock()
	if inf.seen == nil {
		return
	}
	if u.Op == OpSet {
		// Of two pods of one source and UID (a malformed SET) the later
		// wins, as in the cache, and is handed on once.
		now := make(map[podKey]int, len(u.Pods))
		for i, p := range u.Pods {
			now[podKey{p.p.source, p.p.uid}] = i
		}
		var gone []*pod
		for k, p := range inf.seen {
			if _, ok := now[k]; !ok {
				gone = append(gone, p.p)
			}
		}
		sort.Slice(gone, func(i, j int) bool { return comparePods(gone[i], gone[j]) < 0 })
		for _, p := range gone {
			delete(inf.seen, podKey{p.source, p.uid})
			c.callDelete(Pod{p})
		}
		for i, p := range u.Pods {
			if now[podKey{p.p.source, p.p.uid}] == i {
				c.upsert(p, true)
			}
		}
		return
	}
	for _, p := range u.Pods {
		if u.Op != OpRemove {
			c.upsert(p, false)
			continue
		}
		k := podKey{p.p.source, p.p.uid}
		if old, ok := inf.seen[k]; ok {
			delete(inf.seen, k)
			c.callDelete(old)
		}
	}
}
