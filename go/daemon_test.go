package podmux

// The client against the real daemon (PODMUX_BIN, set by the podmux
// suite's tests/go-test.sh): restarts clean and by SIGKILL, a cut as a
// slow consumer, a resume that fails, in the three modes; and the
// example program across a restart.  Skipped when PODMUX_BIN is unset.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var modes = []string{"incremental", "snapshot", "snapshot-and-updates"}

const node = "node1"

func podmuxBin(t *testing.T) string {
	bin := os.Getenv("PODMUX_BIN")
	if bin == "" {
		t.Skip("PODMUX_BIN is not set: the tests against the real daemon need a built podmux " +
			"(the podmux suite's tests/go-test.sh sets it)")
	}
	return bin
}

type daemon struct {
	t         *testing.T
	bin, dir  string
	sock      string
	manifests string
	args      []string
	cmd       *exec.Cmd
	exited    chan *os.ProcessState
	starts    int
}

func newDaemon(t *testing.T, mode string, extra ...string) *daemon {
	d := &daemon{t: t, bin: podmuxBin(t), dir: shortDir(t)}
	d.sock = filepath.Join(d.dir, "s.sock")
	d.manifests = filepath.Join(d.dir, "m")
	if err := os.Mkdir(d.manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	// --plugins-registry-dir "": never the machine's plugin registry.
	d.args = append([]string{"run", "--pod-manifest-path", d.manifests, "--socket", d.sock, "--node-name", node,
		"--mode", mode, "--file-check-frequency", "1s", "--plugins-registry-dir", ""}, extra...)
	t.Cleanup(func() {
		if d.cmd != nil {
			_ = d.cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

func (d *daemon) stderr() string {
	b, _ := os.ReadFile(filepath.Join(d.dir, fmt.Sprintf("podmux.%d.stderr", d.starts)))
	return string(b)
}

func (d *daemon) start() {
	d.t.Helper()
	d.starts++
	errf, err := os.Create(filepath.Join(d.dir, fmt.Sprintf("podmux.%d.stderr", d.starts)))
	if err != nil {
		d.t.Fatal(err)
	}
	defer errf.Close()
	d.cmd = exec.Command(d.bin, d.args...)
	d.cmd.Stderr = errf
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.exited = make(chan *os.ProcessState, 1)
	go func(cmd *exec.Cmd, exited chan *os.ProcessState) {
		st, _ := cmd.Process.Wait()
		exited <- st
	}(d.cmd, d.exited)
	// Serving once a connection is accepted (the socket file comes a
	// moment before the listen).
	waitFor(d.t, "the daemon's socket", func() bool {
		select {
		case st := <-d.exited:
			d.t.Fatalf("podmux exited (%v) before serving: %s", st, d.stderr())
		default:
		}
		nc, err := net.Dial("unix", d.sock)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
}

// stop signals the daemon we started, by its PID; after SIGTERM it must
// exit 0.
func (d *daemon) stop(sig syscall.Signal) {
	d.t.Helper()
	if err := d.cmd.Process.Signal(sig); err != nil {
		d.t.Fatal(err)
	}
	st := <-d.exited
	d.cmd = nil
	if sig == syscall.SIGTERM && (st == nil || !st.Success()) {
		d.t.Fatalf("podmux exited with %v after SIGTERM: %s", st, d.stderr())
	}
}

// manifest writes a static pod manifest (through a rename, as an editor
// or a deployment tool does).  uid pins metadata.uid (a pod whose
// manifest changes then keeps its UID: an UPDATE); pad adds an
// annotation of that many bytes.
func (d *daemon) manifest(name, uid, image string, pad int) {
	d.t.Helper()
	md := map[string]any{"name": name}
	if uid != "" {
		md["uid"] = uid
	}
	if pad > 0 {
		md["annotations"] = map[string]string{"example.com/padding": strings.Repeat("x", pad)}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": md,
		"spec": map[string]any{"containers": []any{map[string]string{"name": "main", "image": image}}}})
	tmp := filepath.Join(d.manifests, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.manifests, name+".json")); err != nil {
		d.t.Fatal(err)
	}
}

func (d *daemon) remove(name string) {
	if err := os.Remove(filepath.Join(d.manifests, name+".json")); err != nil {
		d.t.Fatal(err)
	}
}

// state is the daemon's state now, as a new client's cache after its
// synced.
func (d *daemon) state() string {
	d.t.Helper()
	c := NewClient(Config{Path: d.sock, NoReconnect: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	waitFor(d.t, "a new client's full state", func() bool {
		select {
		case err := <-done:
			d.t.Fatalf("a new client ended: %v", err)
		default:
		}
		return c.HasSynced()
	})
	cancel()
	<-done
	return dump(c)
}

// status is the daemon's status message.
func (d *daemon) status() map[string]any {
	d.t.Helper()
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		d.t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(waitLimit))
	if _, err := nc.Write([]byte("{\"request\":\"status\"}\n")); err != nil {
		d.t.Fatal(err)
	}
	sc := bufio.NewScanner(nc)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["type"] == "status" {
			return m
		}
	}
	d.t.Fatalf("no status: %v", sc.Err())
	return nil
}

// names is the pods' names in the cache, in its order.
func names(c *Client) string {
	var s []string
	for _, p := range c.Pods() {
		s = append(s, p.Name())
	}
	return strings.Join(s, " ")
}

func pn(name string) string { return name + "-" + node }

// Restarts, clean and by SIGKILL, in each mode: the cache follows, and
// after each restart the handlers get exactly what changed while the
// daemon was away; a pod whose only difference is the new run's
// config.seen stamp is no change.
func TestRealRestarts(t *testing.T) {
	for _, mode := range modes {
		mode := mode
		t.Run(mode, func(t *testing.T) {
			d := newDaemon(t, mode)
			d.manifest("a", "", "img:1", 0)
			d.manifest("b", "uid-b", "img:1", 0)
			d.manifest("c", "", "img:1", 0)
			d.start()
			x := start(t, Config{Path: d.sock})
			waitFor(t, "the first state", func() bool { return x.c.HasSynced() && x.c.Len() == 3 })
			x.r.expect(t, "pods ADD file "+uids(x.c, "a", "b", "c"), "synced state")
			// Live: the mode decides the shape (a SET in the snapshot
			// modes), the cache follows.
			d.manifest("e", "", "img:1", 0)
			waitFor(t, "e", func() bool { return x.c.Len() == 4 })
			x.r.skip(t, func(s string) bool { return strings.HasPrefix(s, "ready ") })
			if mode == "incremental" {
				x.r.expect(t, "pods ADD file "+uids(x.c, "e"))
			} else {
				x.r.expect(t, "pods SET file "+uids(x.c, "a", "b", "c", "e"))
			}
			for i, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
				before := map[string]string{}
				for _, p := range x.c.Pods() {
					before[p.Name()] = p.UID()
				}
				d.stop(sig)
				// While it is away: b changes (its UID pinned: an
				// UPDATE), c goes, d comes; a and e stay as they were.
				d.manifest("b", "uid-b", fmt.Sprintf("img:%d", i+2), 0)
				d.remove("c")
				d.manifest("d", "", "img:1", 0)
				d.start()
				waitFor(t, "the state after the restart", func() bool {
					return names(x.c) == strings.Join([]string{pn("a"), pn("b"), pn("d"), pn("e")}, " ")
				})
				// Before the resync: the live records of the last round,
				// the end of the connection, the reconnections.
				x.r.skip(t, func(s string) bool { return !strings.HasPrefix(s, "pods ") || !strings.Contains(s, " resync") })
				x.r.expect(t, "pods REMOVE file resync "+before[pn("c")], "pods ADD file resync "+uids(x.c, "d"),
					"pods UPDATE file resync "+uids(x.c, "b"), "synced state")
				if got, want := dump(x.c), d.state(); got != want {
					t.Fatalf("after the restart (%v) the cache is\n%s\nthe daemon's state\n%s", sig, got, want)
				}
				x.r.checkModel(t, x.c)
				// Back for the next round.
				d.manifest("c", "", "img:1", 0)
				d.remove("d")
				waitFor(t, "c back", func() bool {
					return names(x.c) == strings.Join([]string{pn("a"), pn("b"), pn("c"), pn("e")}, " ")
				})
			}
			x.r.checkModel(t, x.c)
			d.stop(syscall.SIGTERM)
		})
	}
}

// uids is the UIDs of the pods with these manifest names, in the cache's
// order, as the recorder writes them.
func uids(c *Client, manifest ...string) string {
	var s []string
	for _, p := range c.Pods() {
		for _, m := range manifest {
			if p.Name() == pn(m) {
				s = append(s, p.UID())
			}
		}
	}
	return strings.Join(s, " ")
}

// A consumer that stops reading is cut by the daemon (SlowConsumer, or
// the end of the stream in the middle of a line); it reconnects by itself
// and resumes after the last message it applied: with the history, a
// replay; without (--history 1), a full state handed on as the
// difference.  Either way the cache ends equal to the daemon's state and
// the handlers saw every change once.
func TestRealSlowConsumerCut(t *testing.T) {
	for _, history := range []string{"4096", "1"} {
		history := history
		t.Run("history="+history, func(t *testing.T) {
			d := newDaemon(t, "incremental", "--max-consumer-backlog", "262144", "--history", history)
			d.manifest("web", "", "img:1", 0)
			d.start()
			r := newRec()
			h := r.handlers()
			var block sync.Mutex
			blocking := false
			pods := h.Pods
			h.Pods = func(u Update) {
				pods(u)
				block.Lock() // held by the test while the consumer must not read
				block.Unlock()
			}
			c := NewClient(Config{Path: d.sock, Handlers: h})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() {
				if blocking {
					block.Unlock()
				}
				cancel()
				<-done
			}()
			waitFor(t, "the first state", func() bool { return c.HasSynced() && c.Len() == 1 })
			block.Lock()
			blocking = true
			// ~30 KB per pod, one ADD per file: the consumer is stuck in
			// its handler of the first, the daemon queues the rest.
			for i := 0; i < 120; i++ {
				d.manifest(fmt.Sprintf("big%03d", i), "", "img:1", 30000)
			}
			waitFor(t, "the daemon to drop the consumer", func() bool {
				n, _ := d.status()["dropped_consumers"].(float64)
				return n >= 1
			})
			blocking = false
			block.Unlock()
			waitFor(t, "every pod after the resume", func() bool { return c.Len() == 121 })
			waitFor(t, "the daemon's state", func() bool { return dump(c) == d.state() })
			r.checkModel(t, c)
			r.mu.Lock()
			log := strings.Join(r.log, "\n")
			errs := append([]*Error(nil), r.errs...)
			rcs := append([]Reconnect(nil), r.reconnects...)
			r.mu.Unlock()
			if len(errs) == 0 || !(errors.Is(errs[0], ErrSlowConsumer) || errors.Is(errs[0], ErrClosed)) || errs[0].Fatal {
				t.Fatalf("errors %v", errs)
			}
			if len(rcs) == 0 || !rcs[0].Resume || rcs[0].ResumeAfter == 0 {
				t.Fatalf("reconnects %+v", rcs)
			}
			if history == "1" {
				if !strings.Contains(log, "synced state") || !strings.Contains(log, "pods ADD file resync") {
					t.Fatalf("no resync after a failed resume:\n%s", log)
				}
				if strings.Contains(log, "UPDATE") || strings.Contains(log, "REMOVE") {
					t.Fatalf("a resync of pods that did not change:\n%s", log)
				}
			} else if !strings.Contains(log, "synced resumed") {
				t.Fatalf("no replay:\n%s", log)
			}
			d.stop(syscall.SIGTERM)
		})
	}
}

// manifestURL is a manifest URL for the daemon's HTTP source, on
// 127.0.0.1: it serves a PodList, and can stall (a slow server: every
// request waits until release).
type manifestURL struct {
	url     string
	mu      sync.Mutex
	body    []byte
	stalled chan struct{} // non-nil while stalled; closed by release
}

func newManifestURL(t *testing.T) *manifestURL {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &manifestURL{url: "http://" + ln.Addr().String() + "/pods"}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		stalled := m.stalled
		m.mu.Unlock()
		if stalled != nil {
			select {
			case <-stalled:
			case <-r.Context().Done():
				return
			}
		}
		m.mu.Lock()
		body := m.body
		m.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		m.release()
		_ = srv.Close()
	})
	return m
}

// serve sets the pods served: name -> image, each with metadata.uid
// "uid-" + name.
func (m *manifestURL) serve(pods map[string]string) {
	var items []any
	for name, image := range pods {
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": name, "uid": "uid-" + name},
			"spec":     map[string]any{"containers": []any{map[string]string{"name": "main", "image": image}}}})
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "PodList", "metadata": map[string]any{},
		"items": items})
	m.mu.Lock()
	m.body = b
	m.mu.Unlock()
}

func (m *manifestURL) stall() {
	m.mu.Lock()
	m.stalled = make(chan struct{})
	m.mu.Unlock()
}

func (m *manifestURL) release() {
	m.mu.Lock()
	if m.stalled != nil {
		close(m.stalled)
		m.stalled = nil
	}
	m.mu.Unlock()
}

// shortNames is the cache's pods as their manifest names (without the
// node), in its order.
func shortNames(c *Client) string {
	var s []string
	for _, p := range c.Pods() {
		s = append(s, strings.TrimSuffix(p.Name(), "-"+node))
	}
	return strings.Join(s, " ")
}

// podChanges is "OP name" (resync marked "OP name resync") of every pod
// in the pods records of a recorder's log, SETs left out, sorted; names
// are the pods' UIDs without "uid-".
func podChanges(log []string) []string {
	var out []string
	for _, l := range log {
		w := strings.Fields(l)
		if len(w) < 3 || w[0] != "pods" || w[1] == "SET" {
			continue
		}
		uids, tag := w[3:], ""
		if len(uids) > 0 && uids[0] == "resync" {
			uids, tag = uids[1:], " resync"
		}
		for _, u := range uids {
			out = append(out, w[1]+" "+strings.TrimPrefix(u, "uid-")+tag)
		}
	}
	sort.Strings(out)
	return out
}

// A daemon restart while its manifest URL stalls (a slow server): the
// client reconnects during the window, keeps the HTTP pods (no REMOVE, no
// ADD again, nothing told), and once the URL answers gets exactly what
// changed while the daemon was away (doc/protocol.md, "A restarted
// daemon's late sources"); in the three modes.  As the C library's and
// the Python module's test in tests/integration/test_client.py, there
// with a server that refuses.
func TestRealLateSource(t *testing.T) {
	for _, mode := range modes {
		mode := mode
		t.Run(mode, func(t *testing.T) {
			m := newManifestURL(t)
			m.serve(map[string]string{"h1": "img:1", "h2": "img:1", "h3": "img:1"})
			d := newDaemon(t, mode, "--manifest-url", m.url, "--http-check-frequency", "1s")
			for _, f := range []string{"f1", "f2", "f3"} {
				d.manifest(f, "uid-"+f, "img:1", 0)
			}
			d.start()
			x := start(t, Config{Path: d.sock})
			waitFor(t, "the six pods, sources ready", func() bool {
				s, ok := x.c.SourcesReady()
				return ok && strings.Join(s, ",") == "file,http" && x.c.Len() == 6
			})
			take := func() []string {
				x.r.mu.Lock()
				defer x.r.mu.Unlock()
				log := x.r.log
				x.r.log = nil
				return log
			}
			take()
			m.stall()
			d.stop(syscall.SIGTERM)
			d.manifest("f2", "uid-f2", "img:2", 0)
			d.manifest("f4", "uid-f4", "img:1", 0)
			m.serve(map[string]string{"h1": "img:1", "h2": "img:2", "h4": "img:1"})
			d.start()
			waitFor(t, "the new run's file pods, the HTTP pods kept", func() bool {
				p, _ := x.c.PodByUID("uid-f2")
				return shortNames(x.c) == "f1 f2 f3 f4 h1 h2 h3" && strings.Contains(p.JSON(), "img:2")
			})
			if st := d.state(); strings.Contains(st, "uid-h") {
				t.Fatalf("the daemon has HTTP pods with the URL stalled: the test shows nothing\n%s", st)
			}
			window := take()
			if !strings.Contains(strings.Join(window, "\n"), "synced state") {
				t.Fatalf("no full state from the new run:\n%s", strings.Join(window, "\n"))
			}
			for _, c := range podChanges(window) {
				if strings.Contains(c, " h") {
					t.Fatalf("an HTTP pod told in the window: %s\n%s", c, strings.Join(window, "\n"))
				}
			}
			m.release()
			waitFor(t, "the URL's pods, h3 gone", func() bool { return shortNames(x.c) == "f1 f2 f3 f4 h1 h2 h4" })
			log := append(window, take()...)
			got := strings.Join(podChanges(log), ", ")
			want := "ADD f4 resync, ADD h4, REMOVE h3 resync, UPDATE f2 resync, UPDATE h2 resync"
			if mode != "incremental" {
				// The SET of the late source carries its changes.
				want = "ADD f4 resync, REMOVE h3 resync, UPDATE f2 resync"
			}
			if got != want {
				t.Fatalf("told %s, want %s\n%s", got, want, strings.Join(log, "\n"))
			}
			if got, want := dump(x.c), d.state(); got != want {
				t.Fatalf("the cache is\n%s\nthe daemon's state\n%s", got, want)
			}
			x.r.checkModel(t, x.c)
			d.stop(syscall.SIGTERM)
		})
	}
}

// The example program, built from the module, keeps its cache across a
// daemon restart, as README's Go section says.
func TestRealExampleConsumer(t *testing.T) {
	d := newDaemon(t, "incremental")
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	exe := filepath.Join(d.dir, "consumer")
	build := exec.Command(goBin, "build", "-o", exe, "./examples/consumer")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/consumer: %v\n%s", err, out)
	}
	d.manifest("web", "", "img:1", 0)
	d.start()
	cmd := exec.Command(exe, d.sock)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var errMu sync.Mutex
	var errLines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errMu.Lock()
			errLines = append(errLines, sc.Text())
			errMu.Unlock()
		}
	}()
	said := func() []string {
		errMu.Lock()
		defer errMu.Unlock()
		return append([]string(nil), errLines...)
	}
	want := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.After(waitLimit)
		for {
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("the example exited before %s", what)
				}
				if ok(l) {
					return
				}
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	want("web's ADD", func(l string) bool { return strings.HasPrefix(l, "ADD file default/"+pn("web")+" ") })
	want("synced", func(l string) bool { return l == "synced (full state): 1 pods" })
	d.stop(syscall.SIGTERM)
	// While the daemon is away every retry fails alike: one line says
	// so.  A listener that closes each connection stands in for it, so
	// the retries are counted, not timed.
	away, err := net.Listen("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	var accepted sync.WaitGroup
	accepted.Add(5)
	go func() {
		for n := 0; ; n++ {
			conn, err := away.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Read(make([]byte, 4096))
			conn.Close()
			if n < 5 {
				accepted.Done()
			}
		}
	}()
	accepted.Wait() // the 5th comes after the 4th failed and was said
	waitFor(t, "the line about the connection closed", func() bool {
		for _, l := range said() {
			if strings.Contains(l, "closed the connection before the state was complete") {
				return true
			}
		}
		return false
	})
	away.Close() // removes the socket file
	seen := map[string]bool{}
	for _, l := range said() {
		if seen[l] {
			t.Fatalf("a failure said twice while the daemon is away:\n%s", strings.Join(said(), "\n"))
		}
		seen[l] = true
	}
	d.manifest("db", "", "img:1", 0)
	d.start()
	want("db's resync ADD", func(l string) bool {
		return strings.HasPrefix(l, "ADD file default/"+pn("db")+" ") && strings.HasSuffix(l, " (resync)")
	})
	want("synced with 2 pods", func(l string) bool { return l == "synced (full state): 2 pods" })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the example on SIGTERM: %v", err)
	}
	d.stop(syscall.SIGTERM)
}
