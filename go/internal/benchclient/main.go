// Command benchclient measures the Go package on the bytes the C
// library's benchmark measured (tests/bench/bench_client.c writes them
// with its DIR argument), and prints its figures in the same form, with
// go_ in place of library_.  Run by scripts/bench (its "client" line);
// asserts nothing.
//
//	benchclient DIR
//
// DIR/one-pod.stream: hello, synced, then one-pod messages; each is
// decoded and applied, from accept to the last handed to the handler.
// DIR/set.stream: hello, synced (empty), then SETs of 5,000 pods; then
// lookups by namespace and name, and by namespace, in the cache they
// leave, and by index (ByIndex in turn with its floor, a plain map's
// lookup, make and copy; then AppendByIndex into a slice reused).
// DIR/restart-1.stream and DIR/restart-2.stream: the two connections
// around a daemon restart that changed only config.seen; the
// time from the second connection's accept to its synced (the C library
// and the Python module, reconnecting without backoff, are timed from the
// first synced: the same work but for a connect).
package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"podmux.dev/podmux"
)

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchclient:", err)
	os.Exit(1)
}

// serve writes each stream to one connection in turn on a new socket,
// after reading the client's first line; accepted gets the time each
// connection was accepted.
func serve(dir string, accepted chan<- time.Time, streams ...[]byte) string {
	path := filepath.Join(dir, "go.sock")
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		fail(err)
	}
	go func() {
		defer ln.Close()
		for _, stream := range streams {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if accepted != nil {
				accepted <- time.Now()
			}
			if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
				_, _ = c.Write(stream)
			}
			c.Close()
		}
	}()
	return path
}

// run reads stream with a client until want pods updates were handed on:
// the time, the updates and their pods, and the client.
func run(dir string, stream []byte, want int) (time.Duration, int, int, *podmux.Client) {
	path := serve(dir, nil, stream)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var msgs, pods int
	var end time.Time
	c := podmux.NewClient(podmux.Config{Path: path, NoReconnect: true, Handlers: podmux.Handlers{
		Pods: func(u podmux.Update) {
			msgs++
			pods += len(u.Pods)
			if msgs == want {
				end = time.Now()
				cancel()
			}
		},
	}})
	start := time.Now()
	if err := c.Run(ctx); err != context.Canceled {
		fail(fmt.Errorf("the client ended after %d updates: %v", msgs, err))
	}
	return end.Sub(start), msgs, pods, c
}

// restart reads the two streams with a reconnecting client until its
// second synced: the time from the second accept, the pods updates, and
// the pods in the cache.
func restart(dir string, first, second []byte) (time.Duration, int, int) {
	accepted := make(chan time.Time, 2)
	path := serve(dir, accepted, first, second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var records, synced int
	var end time.Time
	c := podmux.NewClient(podmux.Config{Path: path, Handlers: podmux.Handlers{
		Pods: func(u podmux.Update) { records++ },
		Synced: func(resumed bool) {
			if synced++; synced == 2 {
				end = time.Now()
				cancel()
			}
		},
	}})
	if err := c.Run(ctx); err != context.Canceled {
		fail(fmt.Errorf("the client ended after %d synced: %v", synced, err))
	}
	<-accepted
	return end.Sub(<-accepted), records, c.Len()
}

func read(dir, name string) []byte {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		fail(err)
	}
	return b
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: benchclient DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	onepod, set := read(dir, "one-pod.stream"), read(dir, "set.stream")
	want := bytes.Count(onepod, []byte(`{"type":"pods",`))
	d, msgs, pods, _ := run(dir, onepod, want)
	fmt.Printf("go_decode_apply msgs_per_s=%.0f us_per_msg=%.2f ns_per_pod=%.0f applied=%d\n",
		float64(msgs)/d.Seconds(), float64(d.Microseconds())/float64(msgs), float64(d.Nanoseconds())/float64(pods), msgs)

	sets := bytes.Count(set, []byte(`{"type":"pods",`))
	d, _, _, c := run(dir, set, sets)
	all := c.Pods()
	fmt.Printf("go_set_apply pods=%d sets=%d ms_per_set=%.2f\n", len(all), sets, float64(d.Microseconds())/1000/float64(sets))
	const lookups = 1000000
	start := time.Now()
	found := 0
	for k := 0; k < lookups; k++ {
		p := all[(k*7919)%len(all)]
		if _, ok := c.PodByName(p.Namespace(), p.Name()); ok {
			found++
		}
	}
	d = time.Since(start)
	if found != lookups {
		fail(fmt.Errorf("%d lookups found %d pods", lookups, found))
	}
	fmt.Printf("go_lookup_by_name pods=%d ns_per_lookup=%.0f\n", len(all), float64(d.Nanoseconds())/lookups)
	namespaces := map[string]bool{}
	for _, p := range all {
		namespaces[p.Namespace()] = true
	}
	start = time.Now()
	n := 0
	for k := 0; k < lookups/10; k++ {
		n += len(c.PodsByNamespace(all[(k*7919)%len(all)].Namespace()))
	}
	d = time.Since(start)
	fmt.Printf("go_lookup_by_namespace pods=%d namespaces=%d ns_per_lookup=%.0f\n", len(all), len(namespaces),
		float64(d.Nanoseconds())/(lookups/10))
	_ = n
	// One ByIndex lookup (the built-in namespace index): the keys' pods
	// sorted into the daemon's order, so it grows with the pods found.
	// The keys come from a table of their own made before the clock, as
	// bench_client.c's nss[]: read from a pod picked at random, each
	// lookup would first wait on two cache misses (the pod, then its
	// text) that the C row does not pay.
	// The first lookup builds the index: not timed, as in bench_client.c.
	keys := make([]string, len(all))
	for i, p := range all {
		keys[i] = string([]byte(p.Namespace()))
	}
	if _, err := c.ByIndex(podmux.IndexNamespace, keys[0]); err != nil {
		fail(err)
	}
	// The language's floor for the ByIndex row, beside the same live
	// heap: a plain map of the same pods by namespace, each lookup a map
	// read, a new slice and a copy; no lock, no index of ours.  Timed in
	// blocks taken in turn with the row's, so that both meet the
	// collector in the same state (the first lookups after the SETs find
	// it still pacing itself to the heap they left).
	plain := map[string][]podmux.Pod{}
	for _, p := range all {
		plain[p.Namespace()] = append(plain[p.Namespace()], p)
	}
	const blocks = 20
	var dIndex, dFloor time.Duration
	for blk, per := 0, lookups/10/blocks; blk < blocks; blk++ {
		start = time.Now()
		for k := blk * per; k < (blk+1)*per; k++ {
			v, err := c.ByIndex(podmux.IndexNamespace, keys[(k*7919)%len(keys)])
			if err != nil {
				fail(err)
			}
			n += len(v)
		}
		dIndex += time.Since(start)
		start = time.Now()
		for k := blk * per; k < (blk+1)*per; k++ {
			v := plain[keys[(k*7919)%len(keys)]]
			out := make([]podmux.Pod, len(v))
			copy(out, v)
			n += len(out)
		}
		dFloor += time.Since(start)
	}
	fmt.Printf("go_lookup_by_index pods=%d namespaces=%d ns_per_lookup=%.0f\n", len(all), len(namespaces),
		float64(dIndex.Nanoseconds())/(lookups/10))
	fmt.Printf("go_make_copy_floor pods=%d namespaces=%d ns_per_lookup=%.0f\n", len(all), len(namespaces),
		float64(dFloor.Nanoseconds())/(lookups/10))
	// The same lookups with AppendByIndex into one slice reused: not
	// the contract of the row above (a new slice the caller owns), an
	// extra row for callers that can reuse theirs.
	var buf []podmux.Pod
	start = time.Now()
	for k := 0; k < lookups/10; k++ {
		var err error
		if buf, err = c.AppendByIndex(buf[:0], podmux.IndexNamespace, keys[(k*7919)%len(keys)]); err != nil {
			fail(err)
		}
		n += len(buf)
	}
	d = time.Since(start)
	fmt.Printf("go_append_by_index pods=%d namespaces=%d ns_per_lookup=%.0f\n", len(all), len(namespaces),
		float64(d.Nanoseconds())/(lookups/10))

	d, records, held := restart(dir, read(dir, "restart-1.stream"), read(dir, "restart-2.stream"))
	fmt.Printf("go_restart_resync pods=%d ms=%.2f us_per_pod=%.2f records=%d\n", held,
		float64(d.Microseconds())/1000, float64(d.Microseconds())/float64(held), records)
}
