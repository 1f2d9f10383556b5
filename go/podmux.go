package podmux

import (
	"strconv"
	"time"
)

// Protocol is the number of the stream protocol this package speaks
// (doc/protocol.md).  A daemon that says another one in its hello is
// ErrProtocol, fatal.
const Protocol = 1

// DefaultSocket is the daemon's default socket, used when Config.Path is
// empty.
const DefaultSocket = "/run/podmux/podmux.sock"

// The reconnection backoff: the first retry after BackoffMin, doubling up
// to BackoffMax; back to BackoffMin once a connection reaches "synced".
// The same as the C library's and the Python module's.
const (
	BackoffMin = 100 * time.Millisecond
	BackoffMax = 5 * time.Second
)

// DefaultMaxLine is the default bound on one line from the daemon (a SET
// carries every pod of the node); a longer line is ErrBadMessage
// (syscall.EMSGSIZE).
const DefaultMaxLine = 256 << 20

// Op is the op of a "pods" message or of a computed resync record.
type Op uint8

// The ops of a "pods" message (doc/protocol.md).
const (
	OpSet       Op = iota // the complete merged state: replaces every pod held
	OpAdd                 // pods new to the node
	OpUpdate              // pods that changed
	OpDelete              // pods being deleted gracefully (with deletionTimestamp): still there
	OpRemove              // pods gone
	OpReconcile           // only the pod's status changed
)

// String returns the op's name on the wire: "SET", "ADD", ...
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

func parseOp(s string) (Op, bool) {
	for i, n := range opNames {
		if n == s {
			return Op(i), true
		}
	}
	return 0, false
}

// Update is one change, given to Handlers.Pods after the cache holds it.
//
// Either a "pods" message as the daemon sent it (live, or replayed after
// a resume: Resync false, Seq its number), or a record this package
// computed when a full state replaced the cache (Seq 0): the difference
// between the cache and that state, as REMOVE, ADD and UPDATE records
// per source (sources in byte order, pods in the cache's order), with
// Resync set once the client had been synced before.  Pods are matched by
// source and UID, and a pod the same by the merger's rule (doc/protocol.md,
// "Which pods changed": a new kubernetes.io/config.seen, stamped anew by
// each run of the daemon, is no change; a new name is) is not in an
// UPDATE record, but the cache takes its new text.  Applied in order,
// the updates a handler sees give the cache.  A SET is the whole merged
// state (snapshot modes): the cache is replaced by its pods.
//
// A full state after a daemon restart lacks the sources the new run has
// not heard from yet (an unreachable API server, a slow manifest URL).
// Their pods are held over, as the kubelet makes no deletion before it
// has seen all its sources (doc/protocol.md, "A restarted daemon's late
// sources"): they stay in the cache and nothing is handed on for them.
// When the source delivers, a held-over pod that a live ADD carries again
// is handed on only if it changed, as an UPDATE record (Resync true, Seq
// 0) after the ADD, which goes on with its other pods (maybe none); a
// live SET (snapshot modes) keeps the held-over pods it does not carry
// and is handed on with the whole cache; another op on a held-over pod
// goes as sent.  When sources_ready comes, the pods still held over are
// removed: REMOVE records, Resync true, before Handlers.SourcesReady.
//
// A client started with Config.Resume holds only what came after that
// point (the program holds the rest): a full state cannot be compared
// with that, so it is handed on whole, as one SET of every pod (Source
// "*", Resync true) and a REGISTERED for every plugin.  The program
// replaces what it holds with these.
type Update struct {
	Op     Op
	Source string // "file", "http", "api", or "*"
	Pods   []Pod  // in the daemon's order; the caller may keep them
	Seq    uint64 // the message's number; 0 for a computed record
	Resync bool   // a computed record after a full state replaced a synced cache
}

// Plugin is a registered plugin, as the daemon describes it.
type Plugin struct {
	Socket string // its registration socket: the key
	Type   string // "CSIPlugin", "DevicePlugin", "DRAPlugin"
	Name   string
	JSON   string // the "plugin" object as JSON text
}

// The ops of a plugin message.
const (
	PluginRegistered   = "REGISTERED"
	PluginDeregistered = "DEREGISTERED"
	PluginFailed       = "FAILED"
)

// PluginEvent is a plugin message, given to Handlers.Plugin.  The
// registered plugins are cached by socket like the pods: after a full
// state the client gives REGISTERED for the new or changed ones and
// DEREGISTERED for the gone ones (Seq 0, Resync once synced before).
// FAILED is news, not state: only live and replayed ones are seen.
type PluginEvent struct {
	Op string // PluginRegistered, PluginDeregistered, PluginFailed, or a newer one
	Plugin
	Error  string // FAILED: the reason
	Seq    uint64 // 0 for a computed one
	Resync bool
}

// Serving says what a source serves (the "source" message,
// doc/protocol.md).  A source never said to be anything else is live.
type Serving uint8

// What a source serves.
const (
	// ServingLive: the source reads its origin.
	ServingLive Serving = iota
	// ServingCheckpoint: the source serves its checkpoint
	// (doc/checkpoint.md): the pods the daemon kept from before it
	// started, because the API server has not answered since.
	ServingCheckpoint
	// ServingUnknown: a state this package does not know (see
	// SourceState.State).
	ServingUnknown
)

// String returns "live", "checkpoint" or "unknown".
func (s Serving) String() string {
	if int(s) < len(servingNames) {
		return servingNames[s]
	}
	return "Serving(" + strconv.Itoa(int(s)) + ")"
}

// SourceState is what a source serves, given to Handlers.Source when it
// changes and by Client.SourceState.  The states hold across
// reconnections: after every "synced" the daemon says again each state
// that is not live, so a state kept from before that is not said again
// (the source went live while the client was away, or the daemon
// restarted) ends as live: told with Resync and Seq 0 when the first
// message after synced that is not a "source" message comes.
type SourceState struct {
	Source  string // "api"
	Serving Serving
	State   string // the daemon's word: "live", "checkpoint", ...
	// ServingCheckpoint: when the server last confirmed its pods (RFC
	// 3339 UTC) and their resourceVersion; else "".
	CheckpointTime            string
	CheckpointResourceVersion string
	Seq                       uint64 // the source message's number; 0 for a computed state
	Resync                    bool
}

// Reconnect tells Handlers.Reconnect that a connection ended and another
// is scheduled.
type Reconnect struct {
	Delay       time.Duration // until the attempt
	Attempt     int           // 1 for the first retry after a good connection
	Resume      bool          // it will ask to resume after ResumeAfter
	ResumeAfter uint64
}

// LogLevel is the level of a line given to Handlers.Log.
type LogLevel uint8

// Log levels.
const (
	LogError LogLevel = iota
	LogWarning
	LogInfo
	LogDebug
)

var levelNames = [...]string{"error", "warning", "info", "debug"}

// String returns "error", "warning", "info" or "debug".
func (l LogLevel) String() string {
	if int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "LogLevel(" + strconv.Itoa(int(l)) + ")"
}

// Handlers are the functions a client calls, all from the goroutine
// running Client.Run, one at a time and in the order of the stream.  Nil
// ones are skipped.  When one runs, the cache already holds the change it
// is told about; it may read the cache (and anything else), and may
// cancel Run's context: nothing more is handed on after it returns.  A
// handler must not call Run.
type Handlers struct {
	// Pods gets every change of the pods (see Update).
	Pods func(u Update)
	// Synced: what came before was a replay after the resume point
	// (resumed) or a full state.  Either way every change up to now has
	// been handed to Pods and Plugin; see Client.HasSynced for what the
	// cache then holds.
	Synced func(resumed bool)
	// SourcesReady: every configured source has delivered; called when
	// the list is first seen or changes (a restarted daemon with other
	// sources).  Pods held over after a daemon restart and not delivered
	// again are removed just before (REMOVE records, Resync), list
	// changed or not.
	SourcesReady func(sources []string)
	// Plugin gets every plugin event (see PluginEvent).
	Plugin func(e PluginEvent)
	// Source gets a source's state when it changes (see SourceState),
	// before the Pods records that state applies to.
	Source func(s SourceState)
	// Error gets every error: recovered ones (the client reconnects) and
	// the fatal one that ends Run.
	Error func(err *Error)
	// Reconnect is told of each scheduled reconnection.
	Reconnect func(r Reconnect)
	// Log gets one line for a human: the package never logs by itself.
	Log func(level LogLevel, line string)
	// Line gets every whole line as it arrives, before it is decoded
	// (without its newline; valid during the call only), for tracing.
	Line func(line []byte)
}

// Config configures a client.
type Config struct {
	// Path is the daemon's socket; "" is DefaultSocket.
	Path string
	// Handlers are called from Run.
	Handlers Handlers
	// NoReconnect: the first connection's end (or a failed connect) ends
	// Run with its error instead of a reconnection.
	NoReconnect bool
	// MaxLine is the longest line accepted; 0 is DefaultMaxLine.
	MaxLine int
	// Resume with ResumeAfter: the first connection asks to resume after
	// message ResumeAfter (a point saved from an earlier run of the
	// program, which holds the state up to it, see Client.ResumePoint);
	// later ones resume after what was applied.  The cache then holds
	// only what comes after that point (HasSynced stays false) until a
	// full state comes, which is handed on whole (see Update).
	Resume      bool
	ResumeAfter uint64
}
