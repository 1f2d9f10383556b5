"""podmux — a consumer of podmux's update stream (protocol 1, see
doc/protocol.md in the podmux repository), standard library only, typed
(py.typed: a type checker reads the hints here).

The same semantics as the C library libpodmux-client
(include/podmux/client.h): an always-consistent local cache of the node's
merged pods and registered plugins; handlers (or an iterator of events)
that see each change once and in order, whether it came live, replayed
after a resume, or as a full state replacing the cache (then as the
computed difference, REMOVE / ADD / UPDATE records with resync=True);
reconnection with backoff (0.1 s doubling to 5 s) resuming after the last
message applied.

The difference after a full state counts a pod as changed the way the
daemon's merger does (doc/protocol.md, "Which pods changed"): pods are
matched by source and UID (a pod is its source and UID: the cache holds one
per source and UID), and a matched pod is an UPDATE only if its name,
namespace, labels, annotations (leaving out kubernetes.io/config.source,
.seen and .mirror), deletionTimestamp, deletionGracePeriodSeconds, spec or
status differ as JSON values.  So a daemon restart is not a change: a pod
whose only difference is the new run's config.seen (or, for an API pod,
the resourceVersion and other metadata each run keeps from the version it
first stored) is not handed on, but the cache takes its new text, so a
lookup shows the current run's config.seen.

A full state after a daemon restart lacks the sources the new run has not
heard from yet (an unreachable API server, a slow manifest URL): their
pods are held over, as the kubelet makes no deletion before it has seen
all its sources (doc/protocol.md, "A restarted daemon's late sources").
They stay in the cache and nothing is handed on for them.  When the source
delivers, a held-over pod that a live ADD carries again is handed on only
if it changed, as an UPDATE (resync=True, seq 0) after the ADD, which goes
on with its other pods (maybe none); in the snapshot modes a live SET
keeps the held-over pods it does not carry and is handed on with the whole
cache; another op on a held-over pod goes as sent.  When sources_ready
comes, the pods still held over are removed: REMOVE updates with
resync=True, before on_sources_ready.

A client given resume_after= (a point saved by an earlier run of the
program, which keeps its own state up to it) holds in its cache only what
comes after that point: has_synced stays False after the replay.  A full
state then cannot be compared with state the client never saw, so it is
handed on whole: one SET of every pod (source "*", resync=True) and a
REGISTERED for every plugin; replace what you hold with these.

    import podmux
    with podmux.Client("/run/podmux/podmux.sock") as c:
        for ev in c.events():
            if ev.kind == "pods":          # ev is an EventPods
                for p in ev.update.pods:
                    print(ev.update.op, p.namespace, p.name)

The records (Pod, Update, PluginEvent, Reconnect and the events) are
frozen dataclasses; ops and error kinds are enums whose members are their
strings (Op.ADD == "ADD", printed as ADD).  A client is used by one thread
at a time.  It never logs by itself: log lines go to on_log if set.
"""

# The package is three modules: wire (the protocol's words and records),
# cache (the local copy, the resync diff, the indexes) and client (the
# Client).  Everything a consumer uses is here, so `import podmux` and
# `from podmux import X` keep working.
from .cache import INDEX_NAMESPACE, INDEX_SOURCE, IndexFunc, _same
from .client import (BACKOFF_MAX, BACKOFF_MIN, DEFAULT_MAX_LINE,
                     DEFAULT_SOCKET, READ_BUDGET, Client, Handler,
                     SourceStatus)
from .wire import (BAD_MESSAGE, CLOSED, CONNECT, NOMEM, OPS, PERMISSION,
                   PATH_HEX, PROTOCOL, PROTOCOL_MISMATCH, SERVER,
                   SOURCE_ANNOTATION,
                   Error, ErrorKind, Event, EventError, EventPlugin,
                   EventPods, EventReconnect, EventSource, EventSourcesReady,
                   EventSynced, LogLevel, Op, PluginEvent, PluginOp, Pod,
                   Reconnect, Serving, SourceState, Update, record_path)

__all__ = ["Client", "Pod", "Update", "PluginEvent", "Error", "Reconnect",
           "Op", "PluginOp", "ErrorKind", "LogLevel", "IndexFunc",
           "Serving", "SourceState", "SourceStatus", "Handler",
           "Event", "EventPods", "EventSynced", "EventSourcesReady",
           "EventPlugin", "EventSource", "EventError", "EventReconnect",
           "PROTOCOL", "DEFAULT_SOCKET", "OPS", "INDEX_NAMESPACE",
           "INDEX_SOURCE", "CONNECT", "PERMISSION", "PROTOCOL_MISMATCH",
           "SERVER", "CLOSED", "BAD_MESSAGE", "NOMEM",
           "PATH_HEX", "record_path"]

