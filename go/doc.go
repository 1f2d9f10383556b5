// Package podmux consumes the update stream of podmux, the daemon that
// reproduces the kubelet's pod configuration (static pod files, the
// manifest URL, the API server, merged) and serves it to node agents over
// a unix socket (protocol 1, doc/protocol.md in the podmux sources).
//
// It does for a Go node agent what client-go's informers do for a
// controller: it keeps a local cache of the node's merged pods and
// registered plugins that is always consistent, hands each change to
// your handlers once and in order, and hides the resync logic.  Its
// semantics are exactly those of the C library libpodmux-client
// (podmux_client(3)) and of the Python module:
//
//   - Messages are held until "synced".  A replay after a resume is
//     applied message by message; a full state replaces the cache and is
//     handed on as its difference from the cache: REMOVE, ADD and UPDATE
//     records per source, flagged Resync.
//   - A pod is its source and UID: the cache holds one pod per source and
//     UID, and an update that carries it under another name replaces it.
//   - In that difference pods are matched by source and UID, and a pod is
//     an UPDATE only when its name, namespace, labels, annotations (but
//     kubernetes.io/config.source, .seen and .mirror), deletionTimestamp,
//     deletionGracePeriodSeconds, spec or status differ as JSON values
//     (doc/protocol.md, "Which pods changed"): each run of the daemon
//     stamps config.seen anew, so a daemon restart alone hands on no
//     UPDATE.  The cache still takes the new text.
//   - A full state after a daemon restart lacks the sources the new run
//     has not heard from yet: their pods are held over (kept, not handed
//     on) until the source delivers them again (an unchanged one is not
//     handed on, a changed one is an UPDATE) or sources_ready removes
//     the rest, as the kubelet deletes nothing before it has seen all its
//     sources (doc/protocol.md, "A restarted daemon's late sources").
//   - A source may serve something other than what it reads now: the api
//     source serves its checkpoint while the API server has not answered
//     since the daemon started (doc/checkpoint.md).  Handlers.Source is
//     told when a source's state changes, before the records it applies
//     to, and Client.SourceState answers it (see SourceState): states
//     hold across reconnections, and one the daemon does not say again
//     after a synced (the source went live meanwhile, or the daemon
//     restarted) ends as live.
//   - The client reconnects by itself after the daemon exits, restarts, or
//     cuts it (SlowConsumer, ResourceExhausted, a cut inside a line, whose
//     partial line is dropped), waiting BackoffMin (100 ms) doubling up to
//     BackoffMax (5 s), back to BackoffMin once a connection reaches
//     synced, and resumes after the last message it applied.
//   - A permission refused (ErrPermission, ErrForbidden), a daemon of
//     another protocol (ErrProtocol) or a BadRequest are fatal: Run
//     returns the *Error.  Every error is also given to Handlers.Error;
//     test them with errors.Is.
//   - A line longer than Config.MaxLine (DefaultMaxLine, 256 MiB) or that
//     is not a protocol 1 message is ErrBadMessage: the connection is
//     dropped and the client resumes after the last good message.  No
//     input makes it panic.
//
// # Use
//
//	c := podmux.NewClient(podmux.Config{
//		Path: "/run/podmux/podmux.sock",
//		Handlers: podmux.Handlers{
//			Pods: func(u podmux.Update) {
//				for _, p := range u.Pods {
//					fmt.Println(u.Op, p.Source(), p.Namespace(), p.Name(), p.UID(), u.Resync)
//				}
//			},
//		},
//	})
//	err := c.Run(ctx) // until ctx ends, or a fatal error
//
// Handlers run on Run's goroutine, one at a time, in the stream's order,
// after the cache holds the change.  The cache (Pods, PodByUID, PodByName,
// PodsByNamespace, Plugins, HasSynced, ResumePoint, SourceState) can be read from any
// goroutine at any time.  A Pod keeps its JSON text exactly as the daemon
// sent it; Pod.Decode decodes it into your type, for instance a
// k8s.io/api/core/v1 Pod, without this package importing it.
//
// # The module
//
// The module (podmux.dev/podmux, directory go/ of the podmux sources)
// uses the standard library only and builds with Go 1.19 and later.  Its
// path is not served by a proxy: point your go.mod at the sources,
//
//	require podmux.dev/podmux v0.0.0
//	replace podmux.dev/podmux => /path/to/podmux/go
//
// and `go mod vendor` to vendor it; or copy the package's files into
// your own module.  examples/consumer in the module is a complete
// program; README.md in the module says more.
package podmux
