package podmux

// The per-file records of the files request (doc/protocol.md "Files
// request"): the path a record names, byte for byte.  The same checks as
// the C library's podmux_record_path() (src/util/json_path.c), so a
// record one client refuses the other refuses too.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// PathHex is the member carrying a path's bytes, in hex, when the path is
// not valid UTF-8 (doc/protocol.md "Paths that are not UTF-8"); its name
// comes from scripts/protocol-words.json.
const PathHex = memberPathHex

// ErrNoPath is returned by RecordPath for a record that names no path:
// the manifest URL's, or the files message of a daemon without a static
// pod path.
var ErrNoPath = errors.New("podmux: the record names no path")

// RecordPath returns the path a record names, byte for byte: record is
// the JSON text of a "file" message's record or of the "files" message.
// A name that is not UTF-8 shows with U+FFFD in the record's "path" and
// comes whole in its "path_hex"; the bytes are returned either way
// (string(p) is the name os functions take).  ErrNoPath when it names
// none; another error when the record is not a JSON object, a member is
// not a string, "path_hex" is not whole bytes of hex digits, or the path
// holds a zero byte.
func RecordPath(record []byte) ([]byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(record, &members); err != nil {
		return nil, fmt.Errorf("podmux: a record: %w", err)
	}
	path, err := optString(members, "path")
	if err != nil || path == nil {
		if err == nil {
			err = ErrNoPath
		}
		return nil, err
	}
	hexed, err := optString(members, PathHex)
	if err != nil {
		return nil, err
	}
	raw := []byte(*path)
	if hexed != nil {
		if raw, err = hex.DecodeString(*hexed); err != nil {
			return nil, fmt.Errorf("podmux: %s %q: not whole bytes of hex digits", PathHex, *hexed)
		}
	}
	if bytes.IndexByte(raw, 0) >= 0 {
		return nil, fmt.Errorf("podmux: path %q holds a zero byte", raw)
	}
	return raw, nil
}

// optString: the string member name, nil when absent or null.
func optString(members map[string]json.RawMessage, name string) (*string, error) {
	v, ok := members[name]
	if !ok || string(v) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("podmux: %s must be a string", name)
	}
	return &s, nil
}
