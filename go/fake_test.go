package podmux

// A scripted daemon for the tests: a unix socket that accepts the
// client's connections, reads its first line, and writes the lines a test
// gives it.  And a recorder of what the client's handlers saw, with a
// model built from the updates alone (applied in order, they must give
// the cache).

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// waitLimit bounds every wait of a test: a failure bound, never an
// assertion about speed.
var waitLimit = func() time.Duration {
	scale := 1.0
	if s, err := strconv.ParseFloat(os.Getenv("PODMUX_TEST_TIMEOUT_SCALE"), 64); err == nil && s > 0 {
		scale = s
	}
	if os.Getenv("PODMUX_SANITIZED") == "1" {
		scale *= 3
	}
	return time.Duration(scale * float64(20*time.Second))
}()

// waitFor polls cond until it holds; the test fails after waitLimit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// shortDir is a temporary directory with a short path (a socket path
// has at most 107 bytes), removed when the test ends.
func shortDir(t testing.TB) string {
	d, err := os.MkdirTemp("", "pmx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type fake struct {
	t     testing.TB
	path  string
	mu    sync.Mutex
	ln    *net.UnixListener
	conns chan net.Conn
	cur   net.Conn
	first string // the client's first line on cur
}

func newFake(t testing.TB) *fake {
	f := &fake{t: t, path: filepath.Join(shortDir(t), "s.sock"), conns: make(chan net.Conn, 16)}
	f.listen()
	t.Cleanup(f.stop)
	return f
}

func (f *fake) listen() {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.path, Net: "unix"})
	if err != nil {
		f.t.Fatal(err)
	}
	f.mu.Lock()
	f.ln = ln
	f.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			f.conns <- c
		}
	}()
}

// unlisten closes the listener and removes the socket file (a daemon
// gone).
func (f *fake) unlisten() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ln != nil {
		f.ln.Close()
		f.ln = nil
	}
}

func (f *fake) stop() {
	f.unlisten()
	if f.cur != nil {
		f.cur.Close()
	}
	for {
		select {
		case c := <-f.conns:
			c.Close()
		default:
			return
		}
	}
}

// accept takes the client's next connection and reads its first line.
func (f *fake) accept() {
	f.t.Helper()
	if f.cur != nil {
		f.cur.Close()
	}
	select {
	case f.cur = <-f.conns:
	case <-time.After(waitLimit):
		f.t.Fatal("timed out waiting for the client to connect")
	}
	_ = f.cur.SetReadDeadline(time.Now().Add(waitLimit))
	line, err := bufio.NewReader(f.cur).ReadString('\n')
	if err != nil {
		f.t.Fatalf("reading the client's first line: %v", err)
	}
	f.first = strings.TrimSuffix(line, "\n")
}

func (f *fake) write(b []byte) {
	f.t.Helper()
	if _, err := f.cur.Write(b); err != nil {
		f.t.Fatalf("writing to the client: %v", err)
	}
}

func (f *fake) send(format string, args ...any) {
	f.t.Helper()
	f.write([]byte(fmt.Sprintf(format, args...) + "\n"))
}

func (f *fake) hello(seq uint64) {
	f.send(`{"type":"hello","protocol":1,"mode":"incremental","node":"n1","seq":%d}`, seq)
}

func (f *fake) synced(seq uint64, resumed bool) {
	f.send(`{"type":"synced","seq":%d,"resumed":%v}`, seq, resumed)
}

func (f *fake) pods(seq uint64, op, source string, pods ...string) {
	f.send(`{"type":"pods","seq":%d,"op":"%s","source":"%s","pods":[%s]}`, seq, op, source, strings.Join(pods, ","))
}

// barrier sends two messages of a type no client knows (ignored),
// numbered seq and seq+1, and waits for the client to read the second:
// everything sent before it is then handled.
func (f *fake) barrier(r *rec, seq uint64) {
	f.t.Helper()
	f.send(`{"type":"barrier","seq":%d}`, seq)
	line := fmt.Sprintf(`{"type":"barrier","seq":%d}`, seq+1)
	f.send("%s", line)
	waitFor(f.t, "the client to read the barrier", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.lastLine == line
	})
}

func (f *fake) close() {
	f.cur.Close()
	f.cur = nil
}

// podText is a pod as the tests write it (the C tests' pod_text).
func podText(uid, ns, name, src string, gen int) string {
	return fmt.Sprintf(`{"metadata":{"name":"%s","namespace":"%s","uid":"%s",`+
		`"annotations":{"kubernetes.io/config.source":"%s"}},"spec":{"gen":%d}}`, name, ns, uid, src, gen)
}

// rec records what the handlers saw as lines of text, and the model.
type rec struct {
	mu         sync.Mutex
	log        []string
	lastLine   string
	model      map[string]string // source/uid -> text
	errs       []*Error
	reconnects []Reconnect
	logLines   []string
}

func newRec() *rec { return &rec{model: map[string]string{}} }

func (r *rec) add(s string) {
	r.mu.Lock()
	r.log = append(r.log, s)
	r.mu.Unlock()
}

func (r *rec) handlers() Handlers {
	return Handlers{
		Pods: func(u Update) {
			s := "pods " + u.Op.String() + " " + u.Source
			if u.Resync {
				s += " resync"
			}
			r.mu.Lock()
			if u.Op == OpSet {
				r.model = map[string]string{}
			}
			for _, p := range u.Pods {
				s += " " + p.UID()
				if u.Op == OpRemove {
					delete(r.model, p.Source()+"/"+p.UID())
				} else {
					r.model[p.Source()+"/"+p.UID()] = p.JSON()
				}
			}
			r.mu.Unlock()
			r.add(s)
		},
		Synced: func(resumed bool) {
			if resumed {
				r.add("synced resumed")
			} else {
				r.add("synced state")
			}
		},
		SourcesReady: func(s []string) { r.add("ready " + strings.Join(s, " ")) },
		Source: func(s SourceState) {
			line := "source " + s.Source + " " + s.State
			if s.CheckpointTime != "" || s.CheckpointResourceVersion != "" {
				line += " " + s.CheckpointTime + " " + s.CheckpointResourceVersion
			}
			line += " " + strconv.FormatUint(s.Seq, 10)
			if s.Resync {
				line += " resync"
			}
			r.add(line)
		},
		Plugin: func(e PluginEvent) {
			s := "plugin " + e.Op + " " + e.Socket
			if e.Resync {
				s += " resync"
			}
			if e.Error != "" {
				s += " error=" + e.Error
			}
			r.add(s)
		},
		Error: func(e *Error) {
			s := "error " + e.Kind.String()
			if e.Reason != "" {
				s += " " + e.Reason
			}
			if e.Fatal {
				s += " fatal"
			}
			r.mu.Lock()
			r.errs = append(r.errs, e)
			r.mu.Unlock()
			r.add(s)
		},
		Reconnect: func(rc Reconnect) {
			s := "reconnect full"
			if rc.Resume {
				s = "reconnect after " + strconv.FormatUint(rc.ResumeAfter, 10)
			}
			r.mu.Lock()
			r.reconnects = append(r.reconnects, rc)
			r.mu.Unlock()
			r.add(s)
		},
		Line: func(l []byte) {
			r.mu.Lock()
			r.lastLine = string(l)
			r.mu.Unlock()
		},
		Log: func(level LogLevel, line string) {
			r.mu.Lock()
			r.logLines = append(r.logLines, level.String()+": "+line)
			r.mu.Unlock()
		},
	}
}

func (r *rec) lastErr() *Error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) == 0 {
		return nil
	}
	return r.errs[len(r.errs)-1]
}

// expect waits for the next len(want) records and compares them.
func (r *rec) expect(t testing.TB, want ...string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		r.mu.Lock()
		n := len(r.log)
		if n >= len(want) {
			got := append([]string(nil), r.log[:len(want)]...)
			r.log = r.log[len(want):]
			r.mu.Unlock()
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("handlers saw:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			return
		}
		got := append([]string(nil), r.log...)
		r.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("timed out: handlers saw only:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "),
				strings.Join(want, "\n  "))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// skip waits for a record for which noise is false, and drops the ones
// before it.
func (r *rec) skip(t testing.TB, noise func(string) bool) {
	t.Helper()
	var dropped []string
	deadline := time.Now().Add(waitLimit)
	for {
		r.mu.Lock()
		for len(r.log) > 0 && noise(r.log[0]) {
			dropped = append(dropped, r.log[0])
			r.log = r.log[1:]
		}
		found := len(r.log) > 0
		r.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for a record after these:\n  %s", strings.Join(dropped, "\n  "))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// none checks that no record is pending.
func (r *rec) none(t testing.TB) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.log) > 0 {
		t.Fatalf("handlers saw more:\n  %s", strings.Join(r.log, "\n  "))
	}
}

// checkModel: the updates the handlers saw, applied in order, give the
// cache (a text that differs only in its config.seen stamp is the same).
func (r *rec) checkModel(t testing.TB, c *Client) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	pods := c.Pods()
	var keys []string
	for _, p := range pods {
		k := p.Source() + "/" + p.UID()
		keys = append(keys, k)
		text, ok := r.model[k]
		if !ok || !samePod(text, p.JSON()) {
			t.Fatalf("cache pod %s is not what the handlers saw: %q vs %q", k, p.JSON(), text)
		}
	}
	if len(r.model) != len(pods) {
		var mk []string
		for k := range r.model {
			mk = append(mk, k)
		}
		sort.Strings(mk)
		t.Fatalf("the handlers' model holds %v, the cache %v", mk, keys)
	}
}

// dump is the cache as "source/uid=json" lines in its order.
func dump(c *Client) string {
	var b strings.Builder
	for _, p := range c.Pods() {
		fmt.Fprintf(&b, "%s/%s=%s\n", p.Source(), p.UID(), p.JSON())
	}
	return b.String()
}

// running is a client whose Run is in a goroutine.
type running struct {
	c      *Client
	r      *rec
	cancel context.CancelFunc
	done   chan error
}

func start(t testing.TB, cfg Config) *running {
	r := newRec()
	user := cfg.Handlers.Source
	cfg.Handlers = r.handlers()
	if user != nil { // the caller's too, after the record's
		rec := cfg.Handlers.Source
		cfg.Handlers.Source = func(s SourceState) { rec(s); user(s) }
	}
	c := NewClient(cfg)
	c.setBackoff(time.Millisecond, 8*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	x := &running{c: c, r: r, cancel: cancel, done: make(chan error, 1)}
	go func() { x.done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-x.done
	})
	return x
}

// result waits for Run to return.
func (x *running) result(t testing.TB) error {
	t.Helper()
	select {
	case err := <-x.done:
		x.done <- err
		return err
	case <-time.After(waitLimit):
		t.Fatal("timed out waiting for Run to return")
	}
	return nil
}
