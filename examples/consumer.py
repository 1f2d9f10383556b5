#!/usr/bin/python3
"""consumer — keeps the node's pods with the podmux module and prints each
change: python3 consumer.py [SOCKET], with the module installed as README.md
"Writing a consumer" shows.  tests/type-check.sh type-checks it."""
import sys

import podmux

# The last error printed: while the daemon is away every retry fails
# alike, and one line says so; the next synced clears it.
last_error = None

try:
    with podmux.Client(sys.argv[1] if len(sys.argv) > 1 else None) as client:
        for ev in client.events():    # reconnects and resumes by itself
            if ev.kind == "pods":     # an EventPods: its update
                u = ev.update
                for p in u.pods:
                    print(u.op, p.source, "%s/%s" % (p.namespace, p.name),
                          p.uid, "(resync)" if u.resync else "", flush=True)
            elif ev.kind == "synced":
                last_error = None
                print("synced %s: %d pods" % (
                    "(resumed)" if ev.resumed else "(full state)",
                    len(client)), flush=True)
            elif ev.kind == "error":
                e = ev.error
                if not e.fatal and e.message == last_error:
                    continue          # the same failure again: said already
                last_error = e.message
                print("consumer: %s%s" % (e.message,
                                          "" if e.fatal else " (retrying)"),
                      file=sys.stderr, flush=True)
except KeyboardInterrupt:
    pass
except podmux.Error as e:
    sys.exit("consumer: %s" % e.message)
