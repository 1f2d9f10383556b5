// Command consumer keeps the node's pods with the podmux Go package and
// prints each change, as examples/consumer.c does with the C library.
//
//	go run ./examples/consumer [SOCKET]
//
// It runs until interrupted (SIGINT, SIGTERM), reconnecting and resuming
// by itself across daemon restarts.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"podmux.dev/podmux"
)

func main() {
	path := podmux.DefaultSocket
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var c *podmux.Client
	// The last error printed: while the daemon is away every retry fails
	// alike, and one line says so; the next Synced clears it.  The
	// handlers run one at a time, on Run's goroutine.
	lastError := ""
	c = podmux.NewClient(podmux.Config{
		Path: path,
		Handlers: podmux.Handlers{
			// Called once per change, in order, after the cache holds it.
			Pods: func(u podmux.Update) {
				resync := ""
				if u.Resync {
					resync = " (resync)"
				}
				for _, p := range u.Pods {
					fmt.Printf("%s %s %s/%s %s%s\n", u.Op, p.Source(), p.Namespace(), p.Name(), p.UID(), resync)
				}
			},
			Synced: func(resumed bool) {
				lastError = ""
				how := "(full state)"
				if resumed {
					how = "(resumed)"
				}
				fmt.Printf("synced %s: %d pods\n", how, c.Len())
			},
			// The package never logs by itself.
			Error: func(err *podmux.Error) {
				if !err.Fatal && err.Message == lastError {
					return // the same failure again: said already
				}
				lastError = err.Message
				retrying := " (retrying)"
				if err.Fatal {
					retrying = ""
				}
				fmt.Fprintf(os.Stderr, "consumer: %s%s\n", err.Message, retrying)
			},
		},
	})
	err := c.Run(ctx) // reconnects and resumes by itself
	if err != nil && !errors.Is(err, context.Canceled) {
		os.Exit(1)
	}
}
