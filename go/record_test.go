package podmux

import (
	"bytes"
	"errors"
	"testing"
)

// The same cases as tests/unit/test_client.c (test_record_path).
func TestRecordPath(t *testing.T) {
	for _, c := range []struct {
		json   string
		want   string
		noPath bool
		bad    bool
	}{
		{json: `{"source":"file","path":"/m/a.yaml","state":"applied"}`, want: "/m/a.yaml"},
		{json: `{"source":"file","path":"/m/w\ufffd.y","path_hex":"2f6d2f77ff2e79"}`, want: "/m/w\xff.y"},
		{json: `{"type":"files","path":"/m\ufffd","path_hex":"2F6DFE","url":null}`, want: "/m\xfe"},
		{json: `{"source":"http","url":"http://x/m"}`, noPath: true},
		{json: `{"type":"files","path":null}`, noPath: true},
		{json: `{"path":"/m","path_hex":null}`, want: "/m"},
		{json: `{"path":"/m","path_hex":"2f6"}`, bad: true},
		{json: `{"path":"/m","path_hex":"2g"}`, bad: true},
		{json: `{"path":"/m","path_hex":"2f00"}`, bad: true},
		{json: `{"path":"/a\u0000b"}`, bad: true},
		{json: `{"path":[]}`, bad: true},
		{json: `{"path":"/m","path_hex":7}`, bad: true},
		{json: `[1]`, bad: true},
	} {
		got, err := RecordPath([]byte(c.json))
		switch {
		case c.noPath:
			if !errors.Is(err, ErrNoPath) || got != nil {
				t.Errorf("%s: %q, %v; want ErrNoPath", c.json, got, err)
			}
		case c.bad:
			if err == nil || errors.Is(err, ErrNoPath) || got != nil {
				t.Errorf("%s: %q, %v; want an error", c.json, got, err)
			}
		default:
			if err != nil || !bytes.Equal(got, []byte(c.want)) {
				t.Errorf("%s: %q, %v; want %q", c.json, got, err, c.want)
			}
		}
	}
}
