package podmux

// The connection and the protocol state (doc/protocol.md), as in the C
// library's src/client/client.c.
//
// A connection goes: hello, then messages held until "synced", then
// live.  At synced the held messages are either a replay (applied one by
// one, each as if live) or a full state (applied to a new store, compared
// with the current one, and the difference handed to the handlers as
// computed records).
//
// The resume point is the number of the last message applied to the
// cache: synced's number after a full state, then each live message's.
// A line that cannot be applied (malformed) ends the connection without
// moving it, so the next connection resumes right before that line and
// nothing is lost or seen twice.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// readChunk is the least room a read is given.
const readChunk = 256 << 10

// maxPath is the longest socket path (sun_path without its NUL).
const maxPath = 107

// Client keeps a cache of the daemon's merged pods and registered
// plugins in step with the update stream, and hands each change to its
// handlers once and in order.  Make one with NewClient, then call Run.
// The cache's methods are safe from any goroutine at any time, also
// during Run and after it returns.
type Client struct {
	path string
	// Every handler set is handed every change, in order; indexes kept in
	// step with the cache hook into the store's watch (store.go).
	handlers []Handlers
	inf      informer          // AddEventHandler (informer.go)
	indexes  map[string]*index // guarded by mu (index.go)
	maxLine  int
	noRetry  bool
	ran      int32 // atomic: Run was called
	// The built-in indexes of indexes, set once by NewClient: ByIndex
	// finds them without hashing their names.
	nsIndex, srcIndex *index

	// Guarded by mu: written by Run's goroutine only, which reads them
	// without the lock.
	mu         sync.RWMutex
	st         *store
	syncedOnce bool
	// partial: the cache holds only what came after a point given by
	// Config.Resume (the program holds the rest); cleared by a full state.
	partial   bool
	hasPoint  bool
	point     uint64
	ready     []string
	haveReady bool
	// Sources said not to be live ("source" messages); "live" drops one.
	srcs map[string]*srcState

	// Run's goroutine only.
	ctx                             context.Context
	backoff, backoffMin, backoffMax time.Duration
	attempt                         int
	// confirming: from a synced to the first message after it that is
	// not a "source" message, during which the daemon says again every
	// state that is not live (doc/protocol.md, "source").
	confirming bool
}

// srcState is a source's state kept.
type srcState struct {
	SourceState
	confirmed bool // said since the last synced
}

// conn is one connection's protocol state.
type conn struct {
	helloSeen bool
	live      bool
	held      []*message
}

// NewClient returns a client of cfg.Path (not connected: Run connects).
func NewClient(cfg Config) *Client {
	c := &Client{
		path:       cfg.Path,
		handlers:   []Handlers{cfg.Handlers},
		indexes:    builtinIndexes(),
		maxLine:    cfg.MaxLine,
		noRetry:    cfg.NoReconnect,
		st:         newStore(),
		hasPoint:   cfg.Resume,
		partial:    cfg.Resume,
		point:      cfg.ResumeAfter,
		backoffMin: BackoffMin,
		backoffMax: BackoffMax,
	}
	c.nsIndex, c.srcIndex = c.indexes[IndexNamespace], c.indexes[IndexSource]
	c.st.watch = c.indexWatch
	if c.path == "" {
		c.path = DefaultSocket
	}
	if c.maxLine <= 0 {
		c.maxLine = DefaultMaxLine
	}
	c.backoff = c.backoffMin
	return c
}

// setBackoff is for this package's tests: a shorter backoff.
func (c *Client) setBackoff(min, max time.Duration) {
	c.backoff, c.backoffMin, c.backoffMax = min, min, max
}

// Path returns the socket the client reads.
func (c *Client) Path() string { return c.path }

// Run connects, keeps the cache and calls the handlers, reconnecting by
// itself with backoff after every end of a connection (the daemon exits,
// restarts, cuts the client as a SlowConsumer, a malformed line) and
// resuming after the last message applied.  It returns when ctx ends
// (ctx.Err()), or with an *Error when the client stops on a fatal one:
// ErrPermission (also ErrForbidden), ErrProtocol, ErrBadRequest, a
// socket path too long, or with Config.NoReconnect whatever ended the
// first connection.  A client runs once: a second Run returns
// ErrStopped.
func (c *Client) Run(ctx context.Context) error {
	if !atomic.CompareAndSwapInt32(&c.ran, 0, 1) {
		return ErrStopped
	}
	c.ctx = ctx
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := c.connection(ctx)
		if e == nil {
			return ctx.Err()
		}
		e.Fatal = e.Fatal || c.noRetry || e.Kind == KindPermission || e.Kind == KindProtocol ||
			(e.Kind == KindServer && e.Reason == reasonBadRequest)
		c.report(e)
		if e.Fatal {
			return e
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.wait(ctx); err != nil {
			return err
		}
	}
}

func (c *Client) report(e *Error) {
	level := LogWarning
	if e.Fatal {
		level = LogError
	}
	c.logf(level, "%s", e.Message)
	for _, h := range c.handlers {
		if h.Error != nil {
			h.Error(e)
		}
	}
}

// wait tells the reconnect handlers and waits for the backoff.
func (c *Client) wait(ctx context.Context) error {
	c.mu.RLock()
	rc := Reconnect{Delay: c.backoff, Resume: c.hasPoint, ResumeAfter: c.point}
	c.mu.RUnlock()
	c.attempt++
	rc.Attempt = c.attempt
	c.backoff *= 2
	if c.backoff > c.backoffMax {
		c.backoff = c.backoffMax
	}
	c.logf(LogInfo, "reconnecting to \"%s\" in %d ms (attempt %d)", c.path, rc.Delay.Milliseconds(), rc.Attempt)
	for _, h := range c.handlers {
		if h.Reconnect != nil && ctx.Err() == nil {
			h.Reconnect(rc)
		}
	}
	t := time.NewTimer(rc.Delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}

// connection connects and reads until the connection ends: the *Error
// that ended it, or nil when ctx ended.
func (c *Client) connection(ctx context.Context) *Error {
	if len(c.path) > maxPath {
		return &Error{Kind: KindConnect, Errno: syscall.ENAMETOOLONG, Fatal: true,
			Message: fmt.Sprintf("cannot connect to \"%s\": the path is longer than %d bytes", c.path, maxPath)}
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", c.path)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		errno := errnoOf(err)
		// Linux refuses a connection to a path that is no socket as it
		// does one nobody listens on: say which.
		if fi, serr := os.Stat(c.path); errno == syscall.ECONNREFUSED && serr == nil && fi.Mode()&os.ModeSocket == 0 {
			errno = syscall.ENOTSOCK
		}
		if errno == syscall.EACCES || errno == syscall.EPERM {
			return &Error{Kind: KindPermission, Errno: errno,
				Message: fmt.Sprintf("cannot connect to \"%s\": %s (the socket's mode and group decide who may read the stream)", c.path, errno)}
		}
		return &Error{Kind: KindConnect, Errno: errno,
			Message: fmt.Sprintf("cannot connect to \"%s\": %s (is podmux run serving this path?)", c.path, errno)}
	}
	defer nc.Close()
	// Closing the connection's read side is how ctx's end reaches a Read
	// in progress.
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
			_ = nc.SetReadDeadline(time.Unix(1, 0))
		case <-done:
		}
	}()
	first, what := []byte("{}\n"), "the full state"
	if c.hasPoint {
		first = append(strconv.AppendUint([]byte(`{"resume_after":`), c.point, 10), "}\n"...)
		what = "a resume"
	}
	// A refused write is not the end: the daemon may have written why it
	// closes (Forbidden, ...), so reading goes on and tells.
	_, _ = nc.Write(first)
	c.logf(LogDebug, "connected to \"%s\"; asked for %s", c.path, what)
	return c.read(ctx, nc, &conn{})
}

// read reads and dispatches whole lines until the connection ends.
func (c *Client) read(ctx context.Context, nc net.Conn, cs *conn) *Error {
	buf := make([]byte, 0, readChunk)
	start, scan := 0, 0 // the first byte not consumed; where '\n' is looked for
	for {
		if cap(buf)-len(buf) < readChunk {
			if start > 0 {
				n := copy(buf, buf[start:])
				buf, scan, start = buf[:n], scan-start, 0
			}
			if cap(buf)-len(buf) < readChunk {
				nb := make([]byte, len(buf), 2*cap(buf)+readChunk)
				copy(nb, buf)
				buf = nb
			}
		}
		n, err := nc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		for ctx.Err() == nil {
			i := bytes.IndexByte(buf[scan:], '\n')
			if i < 0 {
				scan = len(buf)
				break
			}
			line := buf[start : scan+i]
			start = scan + i + 1
			scan = start
			if len(line) > c.maxLine {
				return c.tooLong()
			}
			if e := c.dispatch(cs, line); e != nil {
				return e
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		if len(buf)-start > c.maxLine {
			return c.tooLong()
		}
		if err != nil {
			return c.readError(err, cs, len(buf)-start)
		}
	}
}

func (c *Client) tooLong() *Error {
	return &Error{Kind: KindBadMessage, Errno: syscall.EMSGSIZE,
		Message: fmt.Sprintf("\"%s\" sent a line longer than %d bytes", c.path, c.maxLine)}
}

// readError: the end of the stream (a partial line dropped) or a failed
// read.
func (c *Client) readError(err error, cs *conn, partial int) *Error {
	if err != io.EOF {
		return &Error{Kind: KindClosed, Errno: errnoOf(err),
			Message: fmt.Sprintf("the connection to \"%s\" failed: %s", c.path, errnoOf(err))}
	}
	if partial > 0 {
		c.logf(LogInfo, "dropped a partial line of %d bytes: the connection to \"%s\" was cut inside a message",
			partial, c.path)
	}
	how := ""
	if !cs.live {
		how = " before the state was complete"
	}
	return &Error{Kind: KindClosed, Errno: syscall.ECONNRESET,
		Message: fmt.Sprintf("\"%s\" closed the connection%s", c.path, how)}
}

func (c *Client) stopping() bool { return c.ctx.Err() != nil }

// dispatch hands one line to the line handlers, then decodes and acts on
// it.
func (c *Client) dispatch(cs *conn, line []byte) *Error {
	for _, h := range c.handlers {
		if h.Line != nil && !c.stopping() {
			h.Line(line)
		}
	}
	if c.stopping() {
		return nil
	}
	m, err := parseLine(line)
	if err != nil {
		var pv errProtocolVersion
		if errors.As(err, &pv) {
			return &Error{Kind: KindProtocol, Errno: syscall.EPROTONOSUPPORT,
				Message: fmt.Sprintf("\"%s\" speaks protocol %d; this package speaks protocol %d "+
					"(a newer podmux Go package is needed)", c.path, pv.protocol, Protocol)}
		}
		shown := line
		if len(shown) > 80 {
			shown = shown[:80]
		}
		return c.bad(fmt.Sprintf("sent a line that is not a protocol %d message (%s): %s", Protocol, err, shown))
	}
	switch {
	case m.typ == msgError:
		return c.serverError(m)
	case !cs.helloSeen:
		if m.typ != msgHello {
			return c.bad("sent a message before its hello")
		}
		cs.helloSeen = true
		c.logf(LogDebug, "hello from \"%s\": node %s, mode %s", c.path, m.node, m.mode)
	case m.typ == msgHello:
		return c.bad("sent a second hello")
	case !cs.live:
		if m.typ == msgSynced {
			return c.synced(cs, m)
		}
		if m.typ != msgOther {
			cs.held = append(cs.held, m)
		}
	case m.seq <= c.point:
		return c.bad(fmt.Sprintf("sent message %d after %d (numbers must grow)", m.seq, c.point))
	default:
		if c.confirming && m.typ != msgSource {
			c.confirmEnd()
		}
		// Unless a source handler confirmEnd called stopped the client.
		if !c.stopping() {
			c.applyOne(m)
		}
	}
	return nil
}

func (c *Client) bad(what string) *Error {
	return &Error{Kind: KindBadMessage, Errno: syscall.EBADMSG, Message: "\"" + c.path + "\" " + what}
}

func (c *Client) serverError(m *message) *Error {
	kind, errno := otherError.kind, otherError.errno
	if se, ok := serverErrors[m.reason]; ok {
		kind, errno = se.kind, se.errno
	}
	return &Error{Kind: kind, Errno: errno, Reason: m.reason,
		Message: fmt.Sprintf("\"%s\" closed the connection: %s: %s", c.path, m.reason, m.text)}
}

// setPoint: called with mu held.
func (c *Client) setPoint(seq uint64) {
	c.point = seq
	c.hasPoint = true
}

// applyOne applies one message to the cache and hands it on, as live.
func (c *Client) applyOne(m *message) {
	switch m.typ {
	case msgPods:
		c.mu.Lock()
		updates := c.applyPods(m)
		c.setPoint(m.seq)
		c.mu.Unlock()
		for _, u := range updates {
			c.deliverPods(u)
		}
	case msgPlugin:
		c.mu.Lock()
		c.st.applyPlugin(m)
		c.setPoint(m.seq)
		c.mu.Unlock()
		c.deliverPlugin(PluginEvent{Op: m.pluginOp, Plugin: m.plugin, Error: m.errorText, Seq: m.seq})
	case msgSourcesReady:
		// Every source has delivered: a pod still held over was not
		// delivered again, or its source is gone.
		c.mu.Lock()
		n := len(c.st.held)
		recs := c.st.dropHeld()
		c.setPoint(m.seq)
		c.mu.Unlock()
		if n > 0 {
			c.logf(LogInfo, "sources ready on \"%s\": %d pods held over since the last full state were not "+
				"delivered again: removed", c.path, n)
		}
		for _, r := range recs {
			c.deliverPods(Update{Op: r.op, Source: r.source, Pods: r.pods, Resync: true})
		}
		c.applyReady(m.sources)
	case msgSource:
		c.applySource(m)
	default:
		c.mu.Lock()
		c.setPoint(m.seq)
		c.mu.Unlock()
	}
}

// applyPods applies a "pods" message (mu held) and returns what to hand
// on.  While pods are held over (doc/protocol.md, "A restarted daemon's
// late sources"): an ADD that carries a held pod again ends its
// hold-over, and the pod is handed on only if it changed, in an UPDATE
// (Resync) after the ADD, which goes on with the other pods (maybe none);
// a SET keeps the held pods it does not carry and is handed on with the
// whole cache; other ops go as sent.
func (c *Client) applyPods(m *message) []Update {
	live := Update{Op: m.op, Source: m.source, Pods: m.pods, Seq: m.seq}
	st := c.st
	switch {
	case len(st.held) == 0:
		st.applyPods(m)
		return []Update{live}
	case m.op == OpSet:
		st.setKeepingHeld(m)
		live.Pods = wrap(st.pods)
		return []Update{live}
	case m.op != OpAdd:
		st.applyPods(m)
		return []Update{live}
	}
	var keep, changed []Pod
	for _, p := range m.pods {
		h := st.get(p.p.source, p.p.uid)
		switch {
		case !st.isHeld(h):
			keep = append(keep, p)
		case !samePod(h.text, p.p.text):
			changed = append(changed, p)
		}
	}
	st.applyPods(m)
	live.Pods = keep
	updates := []Update{live}
	if len(changed) > 0 {
		updates = append(updates, Update{Op: OpUpdate, Source: m.source, Pods: changed, Resync: true})
	}
	return updates
}

// applyReady keeps a sources_ready list, and tells when it differs.
func (c *Client) applyReady(sources []string) {
	c.mu.Lock()
	same := c.haveReady && len(c.ready) == len(sources)
	for i := 0; same && i < len(sources); i++ {
		same = c.ready[i] == sources[i]
	}
	if !same {
		c.ready = append([]string(nil), sources...)
		c.haveReady = true
	}
	c.mu.Unlock()
	if same {
		return
	}
	for _, h := range c.handlers {
		if h.SourcesReady != nil && !c.stopping() {
			h.SourcesReady(append([]string(nil), sources...))
		}
	}
}

// applySource keeps (or, for "live", drops) a source's state, and tells
// it when it changed.
func (c *Client) applySource(m *message) {
	st := SourceState{Source: m.source, Serving: servingOf(m.state), State: m.state,
		CheckpointTime: m.cpTime, CheckpointResourceVersion: m.cpRV, Seq: m.seq}
	c.mu.Lock()
	old := c.srcs[m.source]
	same := old != nil && old.State == st.State && old.CheckpointTime == st.CheckpointTime &&
		old.CheckpointResourceVersion == st.CheckpointResourceVersion
	tell := false
	switch {
	case same:
		old.confirmed = true
	case st.Serving == ServingLive:
		tell = old != nil
		delete(c.srcs, m.source)
	default:
		if c.srcs == nil {
			c.srcs = map[string]*srcState{}
		}
		c.srcs[m.source] = &srcState{SourceState: st, confirmed: true}
		tell = true
	}
	c.setPoint(m.seq)
	c.mu.Unlock()
	if tell {
		c.deliverSource(st)
	}
}

// confirmEnd: the first message after synced that is not a "source"
// message.  A state not said again is live now (told, Resync).
func (c *Client) confirmEnd() {
	c.confirming = false
	var gone []string
	c.mu.Lock()
	for name, s := range c.srcs {
		if !s.confirmed {
			gone = append(gone, name)
			delete(c.srcs, name)
		}
	}
	c.mu.Unlock()
	sort.Strings(gone)
	for _, name := range gone {
		c.deliverSource(SourceState{Source: name, Serving: ServingLive, State: servingLive, Resync: true})
	}
}

func servingOf(state string) Serving {
	switch state {
	case servingLive:
		return ServingLive
	case servingCheckpoint:
		return ServingCheckpoint
	}
	return ServingUnknown
}

func (c *Client) deliverSource(st SourceState) {
	how := st.State
	if st.CheckpointTime != "" {
		how += " of " + st.CheckpointTime
	}
	if st.CheckpointResourceVersion != "" {
		how += " at resourceVersion " + st.CheckpointResourceVersion
	}
	if st.Resync {
		how += " (not said again after synced)"
	}
	c.logf(LogInfo, "source %s on \"%s\": %s", st.Source, c.path, how)
	for _, h := range c.handlers {
		if h.Source != nil && !c.stopping() {
			h.Source(st)
		}
	}
}

func (c *Client) deliverPods(u Update) {
	for _, h := range c.handlers {
		if h.Pods != nil && !c.stopping() {
			h.Pods(u)
		}
	}
	c.follow(u)
}

func (c *Client) deliverPlugin(e PluginEvent) {
	for _, h := range c.handlers {
		if h.Plugin != nil && !c.stopping() {
			h.Plugin(e)
		}
	}
}

// synced ends what was held: a replay applied message by message, or a
// full state that replaces the cache.
func (c *Client) synced(cs *conn, m *message) *Error {
	if m.resumed {
		if !c.hasPoint {
			return c.bad("answered a replay to a client that did not ask to resume")
		}
		c.logf(LogInfo, "resumed after %d on \"%s\": %d messages replayed", c.point, c.path, len(cs.held))
		for _, h := range cs.held {
			// A handler stopped the client: nothing more is applied,
			// and the point stays the last message applied.
			if c.stopping() {
				return nil
			}
			if h.seq <= c.point {
				return c.bad(fmt.Sprintf("replayed message %d, not after %d", h.seq, c.point))
			}
			c.applyOne(h)
		}
		c.mu.Lock()
		c.setPoint(m.seq)
		c.mu.Unlock()
	} else {
		c.applyState(cs, m)
	}
	cs.held = nil
	cs.live = true
	c.mu.Lock()
	c.syncedOnce = true
	// The daemon says again, right after synced, every state that is
	// not live.
	for _, s := range c.srcs {
		s.confirmed = false
	}
	c.confirming = len(c.srcs) > 0
	c.mu.Unlock()
	c.backoff = c.backoffMin
	c.attempt = 0
	for _, h := range c.handlers {
		if h.Synced != nil && !c.stopping() {
			h.Synced(m.resumed)
		}
	}
	return nil
}

// applyState builds the full state aside, compares it with the cache,
// swaps it in, and tells the difference.
func (c *Client) applyState(cs *conn, synced *message) {
	fresh := newStore()
	var ready []string
	haveReady := false
	for _, h := range cs.held {
		switch h.typ {
		case msgPods:
			fresh.applyPods(h)
		case msgPlugin:
			fresh.applyPlugin(h)
		case msgSourcesReady:
			ready, haveReady = h.sources, true
		}
	}
	resync, whole := c.syncedOnce, !c.partial
	if whole && len(c.st.pods) > 0 && !haveReady {
		// The sources this state has not heard from keep their pods until
		// they deliver or sources_ready (doc/protocol.md, "A restarted
		// daemon's late sources").
		delivered := map[string]bool{}
		for _, h := range cs.held {
			if h.typ == msgPods {
				delivered[h.source] = true
			}
		}
		for _, p := range fresh.pods {
			delivered[p.source] = true
		}
		fresh.holdOver(c.st, delivered)
	}
	var recs []record
	var plugins []pluginChange
	if whole {
		recs, plugins = c.st.diff(fresh)
	}
	c.mu.Lock()
	c.st.replace(fresh)
	c.setPoint(synced.seq)
	c.partial = false
	n := len(c.st.pods)
	c.mu.Unlock()
	if haveReady {
		c.applyReady(ready)
	}
	if !whole {
		c.tellWhole(fresh)
		return
	}
	how := ""
	if resync {
		how = " (resync)"
	}
	c.logf(LogInfo, "full state from \"%s\": %d pods, %d records of difference%s, %d held over", c.path, n,
		len(recs), how, len(fresh.held))
	for _, r := range recs {
		c.deliverPods(Update{Op: r.op, Source: r.source, Pods: r.pods, Resync: resync})
	}
	for _, p := range plugins {
		c.deliverPlugin(PluginEvent{Op: p.op, Plugin: p.plugin, Resync: resync})
	}
}

// tellWhole hands on a full state met by a cache that holds only what
// came after a saved resume point: what went away before it is unknown
// here, so no difference can be told.  One SET of every pod (source "*")
// and REGISTERED for every plugin, Resync set.
func (c *Client) tellWhole(fresh *store) {
	c.logf(LogInfo, "full state from \"%s\": %d pods, handed on whole (the cache held only what came after the "+
		"resume point)", c.path, len(fresh.pods))
	c.deliverPods(Update{Op: OpSet, Source: "*", Pods: wrap(fresh.pods), Resync: true})
	for _, p := range fresh.plugins {
		c.deliverPlugin(PluginEvent{Op: PluginRegistered, Plugin: p, Resync: true})
	}
}

func (c *Client) logf(level LogLevel, format string, args ...any) {
	for _, h := range c.handlers {
		if h.Log != nil {
			h.Log(level, fmt.Sprintf(format, args...))
		}
	}
}

// ---- the cache -------------------------------------------------------------

// HasSynced reports whether the cache is the daemon's whole state (as of
// the last message applied): once a connection reached "synced" with a
// full state, and from then on (a resume keeps the cache, a replay adds
// to it).  After a daemon restart, until sources_ready, the cache is the
// daemon's state plus the pods held over from the sources it has not
// heard from yet (see Update), each with the text last handed on.  After Config.Resume a replay does not make it true: the cache
// holds only the pods the replay carried, and Handlers.Synced(true) says
// the program is up to date.  It becomes true when a full state comes.
func (c *Client) HasSynced() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.syncedOnce && !c.partial
}

// ResumePoint returns the number of the last message applied (false
// before the first synced, unless Config.Resume was set).  Saved, it
// lets a later run of the program resume with Config.ResumeAfter.
func (c *Client) ResumePoint() (uint64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.point, c.hasPoint
}

// Len returns the number of pods held.
func (c *Client) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.st.pods)
}

func wrap(v []*pod) []Pod {
	out := make([]Pod, len(v))
	for i, p := range v {
		out[i] = Pod{p}
	}
	return out
}

// Pods returns the pods held, in the daemon's order: namespace, name,
// UID, then source.  O(n).
func (c *Client) Pods() []Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return wrap(c.st.pods)
}

// PodByUID returns the pod with this UID (the first in the daemon's order
// if two sources hold the same UID).  O(1).
func (c *Client) PodByUID(uid string) (Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p := c.st.podByUID(uid)
	return Pod{p}, p != nil
}

// PodByName returns the pod namespace/name (the first in the daemon's
// order if several sources hold one).  O(log n).
func (c *Client) PodByName(namespace, name string) (Pod, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	p := c.st.podByName(namespace, name)
	return Pod{p}, p != nil
}

// PodsByNamespace returns the pods of one namespace, in the daemon's
// order.  O(log n + the pods returned).
func (c *Client) PodsByNamespace(namespace string) []Pod {
	c.mu.RLock()
	defer c.mu.RUnlock()
	i, j := c.st.nsRange(namespace)
	return wrap(c.st.pods[i:j])
}

// Plugins returns the registered plugins, by socket.
func (c *Client) Plugins() []Plugin {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]Plugin(nil), c.st.plugins...)
}

// SourcesReady returns the sources of the last sources_ready (false if
// none was seen).
func (c *Client) SourcesReady() ([]string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]string(nil), c.ready...), c.haveReady
}

// SourceState returns what source serves now: true when it is not live
// (the state says what it serves), false when it is live as far as the
// client knows (no state said, or "live" said since; the state then says
// live).
func (c *Client) SourceState(source string) (SourceState, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if s, ok := c.srcs[source]; ok {
		return s.SourceState, true
	}
	return SourceState{Source: source, Serving: ServingLive, State: servingLive}, false
}
