package podmux

import (
	"errors"
	"syscall"
)

// ErrorKind says what went wrong, as the C library's enum
// podmux_error_kind does.
type ErrorKind uint8

// Error kinds.
const (
	// KindConnect: connect failed: no daemon (ENOENT, ECONNREFUSED), a
	// path that is no socket (ENOTSOCK) or too long (ENAMETOOLONG,
	// fatal).
	KindConnect ErrorKind = iota
	// KindPermission: EACCES/EPERM on the socket file, or the daemon said
	// Forbidden (its --allow-uids/--allow-gids).  Fatal.
	KindPermission
	// KindProtocol: the daemon speaks a protocol number this package
	// does not (EPROTONOSUPPORT).  Fatal.
	KindProtocol
	// KindServer: the daemon sent an error message and closes; Reason is
	// its reason.  BadRequest is fatal, the others are retried.
	KindServer
	// KindClosed: the connection ended without an error message (the
	// daemon exited or was killed, a reset).
	KindClosed
	// KindBadMessage: a line that is not a protocol 1 message (not JSON,
	// a member of the wrong type, a number going back, longer than the
	// limit): dropped with the connection; the client resumes after the
	// last good one.
	KindBadMessage
)

var kindNames = [...]string{"connect", "permission", "protocol", "server", "closed", "bad message"}

// String returns the kind in words.
func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Error is what ended a connection (or the client).  Test it with
// errors.Is against the Err* values of its kind and reason, or against
// a syscall.Errno (errors.Is(err, syscall.ENOENT)); errors.As gives the
// fields.
type Error struct {
	Kind    ErrorKind
	Errno   syscall.Errno // the errno the C library gives for the same case
	Reason  string        // KindServer and Forbidden: the daemon's reason
	Message string        // one line for a human, naming the socket
	Fatal   bool          // the client has stopped: no reconnection
}

// Error returns "podmux: " and the message.
func (e *Error) Error() string { return "podmux: " + e.Message }

// Unwrap returns the errno, so errors.Is(err, syscall.ECONNREFUSED) and
// errors.Is(err, fs.ErrNotExist) work.
func (e *Error) Unwrap() error {
	if e.Errno == 0 {
		return nil
	}
	return e.Errno
}

// Is matches the kind and reason values below.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *kindError:
		return t.kind == e.Kind
	case *reasonError:
		return t.reason == e.Reason && (e.Kind == KindServer || e.Kind == KindPermission)
	}
	return false
}

type kindError struct {
	kind ErrorKind
	text string
}

func (k *kindError) Error() string { return k.text }

type reasonError struct {
	reason string
	text   string
}

func (r *reasonError) Error() string { return r.text }

// Values an *Error matches with errors.Is, by kind.
var (
	ErrConnect    error = &kindError{KindConnect, "podmux: cannot connect"}
	ErrPermission error = &kindError{KindPermission, "podmux: permission denied"}
	ErrProtocol   error = &kindError{KindProtocol, "podmux: protocol version not supported"}
	ErrServer     error = &kindError{KindServer, "podmux: the daemon closed the connection with an error"}
	ErrClosed     error = &kindError{KindClosed, "podmux: the connection was closed"}
	ErrBadMessage error = &kindError{KindBadMessage, "podmux: a line that is not a protocol message"}
)

// Values an *Error matches with errors.Is, by the daemon's reason
// (doc/protocol.md, "error").  ErrForbidden is also ErrPermission; the
// others are also ErrServer.
var (
	ErrForbidden         error = &reasonError{reasonForbidden, "podmux: " + reasonForbidden}
	ErrSlowConsumer      error = &reasonError{reasonSlowConsumer, "podmux: " + reasonSlowConsumer}
	ErrResourceExhausted error = &reasonError{reasonResourceExhausted, "podmux: " + reasonResourceExhausted}
	ErrTooManyConsumers  error = &reasonError{reasonTooManyConsumers, "podmux: " + reasonTooManyConsumers}
	ErrShuttingDown      error = &reasonError{reasonShuttingDown, "podmux: " + reasonShuttingDown}
	ErrBadRequest        error = &reasonError{reasonBadRequest, "podmux: " + reasonBadRequest}
	ErrInternalError     error = &reasonError{reasonInternalError, "podmux: " + reasonInternalError}
)

// ErrStopped is returned by Run when the client has already run: a
// client runs once (make another to start again, with Config.Resume to
// go on from the first one's ResumePoint).
var ErrStopped = errors.New("podmux: the client has already run")
