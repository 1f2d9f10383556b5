package podmux

// TestScenarioConsumer is the Go consumer of the three-client scenario
// against the real daemon in tests/integration/test_client.py, which
// builds this package's test binary and runs this test alone with
// PODMUX_CONSUMER_SOCKET set (skipped otherwise).  Like
// tests/client/chaos_client --informer, it adds the index gen (keys of
// tests/fixtures/informer-scenarios.json, from the label gen) and the
// event handler h1 before it connects, then answers commands on standard
// input, one JSON line each on standard output:
//
//	dump            {"synced", "pods": [{"source", "uid", "pod"}...]}: the cache
//	hlog            the event handlers' records since the last hlog
//	handler NAME    adds an event handler NAME (no answer)
//	index NAME KEY  ["source/uid", ...] of ByIndex(NAME, KEY)
//	source NAME     SourceState(NAME) as {"not_live", "serving", "state",
//	                "time", "resource_version", "seq"} (time and
//	                resource_version null when none), as chaos_client's
//	slog            the Source handler's records since the last slog:
//	                "source NAME STATE[ resync]"
//	stall MS        the next Pods handler call blocks until "stall 0" (or
//	                quit), so the client stops reading; no answer
//	quit            Run's context ends

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// labelGen is the pod's label gen as a number (-1 if none).
func labelGen(p Pod) int {
	var v struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if p.Decode(&v) != nil {
		return -1
	}
	n, err := strconv.Atoi(v.Metadata.Labels["gen"])
	if err != nil {
		return -1
	}
	return n
}

func labelGenKeys(p Pod) []string {
	n := labelGen(p)
	var ks []string
	if n%2 == 1 {
		ks = append(ks, "odd")
	}
	if n >= 0 && n < 4 {
		ks = append(ks, fmt.Sprintf("gen=%d", n))
	}
	return ks
}

func labelGenHandler(name string, l *hlog) EventHandler {
	return EventHandler{
		OnAdd: func(p Pod, initial bool) {
			star := ""
			if initial {
				star = "*"
			}
			l.add("%s add%s %s/%s %d", name, star, p.Source(), p.UID(), labelGen(p))
		},
		OnUpdate: func(old, p Pod) {
			l.add("%s update %s/%s %d>%d", name, p.Source(), p.UID(), labelGen(old), labelGen(p))
		},
		OnDelete: func(old Pod) {
			l.add("%s delete %s/%s %d", name, old.Source(), old.UID(), labelGen(old))
		},
	}
}

func TestScenarioConsumer(t *testing.T) {
	sock := os.Getenv("PODMUX_CONSUMER_SOCKET")
	if sock == "" {
		t.Skip("PODMUX_CONSUMER_SOCKET is not set: run by tests/integration/test_client.py")
	}
	var mu sync.Mutex
	var stall chan struct{} // closed by "stall 0"
	l, sl := &hlog{}, &hlog{}
	c := NewClient(Config{Path: sock, Handlers: Handlers{Pods: func(Update) {
		mu.Lock()
		ch := stall
		mu.Unlock()
		if ch != nil {
			<-ch // the daemon cuts a consumer that does not read
		}
	}, Source: func(s SourceState) {
		resync := ""
		if s.Resync {
			resync = " resync"
		}
		sl.add("source %s %s%s", s.Source, s.State, resync)
	}}})
	if err := c.AddIndex("gen", labelGenKeys); err != nil {
		t.Fatal(err)
	}
	c.AddEventHandler(labelGenHandler("h1", l))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	out := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		w := strings.SplitN(in.Text(), " ", 3)
		var err error
		switch w[0] {
		case "dump":
			type ent struct {
				Source string          `json:"source"`
				UID    string          `json:"uid"`
				Pod    json.RawMessage `json:"pod"`
			}
			pods := []ent{}
			for _, p := range c.Pods() {
				pods = append(pods, ent{p.Source(), p.UID(), json.RawMessage(p.JSON())})
			}
			err = out.Encode(map[string]any{"synced": c.HasSynced(), "pods": pods})
		case "hlog":
			v := l.take()
			if v == nil {
				v = []string{}
			}
			err = out.Encode(v)
		case "source":
			st, notLive := c.SourceState(w[1])
			var tm, rv any
			if st.CheckpointTime != "" {
				tm = st.CheckpointTime
			}
			if st.CheckpointResourceVersion != "" {
				rv = st.CheckpointResourceVersion
			}
			err = out.Encode(map[string]any{"not_live": notLive, "serving": st.Serving.String(), "state": st.State,
				"time": tm, "resource_version": rv, "seq": st.Seq})
		case "slog":
			v := sl.take()
			if v == nil {
				v = []string{}
			}
			err = out.Encode(v)
		case "handler":
			c.AddEventHandler(labelGenHandler(w[1], l))
		case "index":
			var v []Pod
			if v, err = c.ByIndex(w[1], w[2]); err == nil {
				ids := []string{}
				for _, p := range v {
					ids = append(ids, p.Source()+"/"+p.UID())
				}
				err = out.Encode(ids)
			}
		case "stall":
			mu.Lock()
			if w[1] != "0" && stall == nil {
				stall = make(chan struct{})
			} else if w[1] == "0" && stall != nil {
				close(stall)
				stall = nil
			}
			mu.Unlock()
		case "quit":
			mu.Lock()
			if stall != nil {
				close(stall)
				stall = nil
			}
			mu.Unlock()
			cancel()
			<-done
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
}
