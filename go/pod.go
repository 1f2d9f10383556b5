package podmux

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// SourceAnnotation is the annotation that names a pod's source in a SET.
const SourceAnnotation = annotationSource

// SeenAnnotation is the time the daemon first stored a pod.  A new run of
// the daemon stamps its own, so it is not part of what a resync compares
// (see Update).
const SeenAnnotation = annotationSeen

// Pod is one pod as the daemon sent it: its compact JSON text, exactly,
// and its identity read from it.  A Pod is a small immutable handle (a
// pointer inside): copying it is cheap, and the cache and the updates
// given to handlers share the same pods.  The zero Pod holds no pod: its
// accessors return "" and Decode an error.
type Pod struct{ p *pod }

type pod struct {
	text      string
	uid       string
	namespace string
	name      string
	annSource string // the config.source annotation, or ""
	source    string // annSource, or the message's source
}

// JSON returns the pod's JSON text as the daemon sent it.
func (p Pod) JSON() string {
	if p.p == nil {
		return ""
	}
	return p.p.text
}

// UID returns metadata.uid.  A pod is identified by its source and UID.
func (p Pod) UID() string {
	if p.p == nil {
		return ""
	}
	return p.p.uid
}

// Namespace returns metadata.namespace ("" if it has none).
func (p Pod) Namespace() string {
	if p.p == nil {
		return ""
	}
	return p.p.namespace
}

// Name returns metadata.name.
func (p Pod) Name() string {
	if p.p == nil {
		return ""
	}
	return p.p.name
}

// Source returns "file", "http" or "api": where the pod comes from (its
// kubernetes.io/config.source annotation in a SET, else the message's
// source).
func (p Pod) Source() string {
	if p.p == nil {
		return ""
	}
	return p.p.source
}

// IsZero reports whether p holds no pod.
func (p Pod) IsZero() bool { return p.p == nil }

// String returns "source namespace/name uid", for messages.
func (p Pod) String() string {
	if p.p == nil {
		return "<no pod>"
	}
	return p.p.source + " " + p.p.namespace + "/" + p.p.name + " " + p.p.uid
}

var errZeroPod = errors.New("podmux: Decode of a zero Pod")

// Decode decodes the pod's JSON text into v with encoding/json, as
// json.Unmarshal does: into a *corev1.Pod of k8s.io/api, a struct of
// your own, or a map.
func (p Pod) Decode(v any) error {
	if p.p == nil {
		return errZeroPod
	}
	return json.Unmarshal([]byte(p.p.text), v)
}

// comparePods is the order of the cache and of a merged SET: namespace,
// name, UID, then source, bytewise.
func comparePods(a, b *pod) int {
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	if c := strings.Compare(a.name, b.name); c != 0 {
		return c
	}
	if c := strings.Compare(a.uid, b.uid); c != 0 {
		return c
	}
	return strings.Compare(a.source, b.source)
}

// walkPod reads one element of "pods": its text, and its identity.  The
// element must be an object with a non-empty string metadata.uid and a
// string metadata.name.
func (p *lineParser) walkPod() (Pod, error) {
	p.ws()
	start := p.pos
	var uid, name, ns, src strField
	isObj, err := p.objectValue(0, func(key []byte, d int) error {
		if string(key) != "metadata" {
			return p.value(d)
		}
		uid, name, ns, src = strField{}, strField{}, strField{}, strField{}
		_, err := p.objectValue(d, func(key []byte, d int) error {
			switch string(key) {
			case "uid":
				return p.strField(d, &uid)
			case "name":
				return p.strField(d, &name)
			case "namespace":
				return p.strField(d, &ns)
			case "annotations":
				src = strField{}
				_, err := p.objectValue(d, func(key []byte, d int) error {
					if string(key) == SourceAnnotation {
						return p.strField(d, &src)
					}
					return p.value(d)
				})
				return err
			}
			return p.value(d)
		})
		return err
	})
	if err != nil {
		return Pod{}, err
	}
	text := string(p.s[start:p.pos])
	d := &pod{
		text:      text,
		uid:       uid.in(text, start),
		name:      name.in(text, start),
		namespace: ns.in(text, start),
		annSource: src.in(text, start),
	}
	if !isObj || d.uid == "" || !name.have {
		return Pod{}, badLine("a pod without metadata.uid and metadata.name")
	}
	d.source = d.annSource
	return Pod{d}, nil
}

// The resync comparison (doc/protocol.md, "Which pods changed"), the
// same rule as the C library's (src/client/client_cache.c) and the
// Python module's, checked against tests/fixtures/resync-diff.json.

// localAnnotations (left out of the comparison), comparedMeta and
// comparedTop are in words.go.

// absent stands for a member missing from a text (null is nil).
type absent struct{}

// samePod reports whether two texts of one pod (same source and UID) are
// the same pod for a resync diff: equal texts, or the same name and
// namespace (a namespace missing or not a string is "") and, equal in
// both, metadata.labels, metadata.annotations without config.source,
// config.seen and config.mirror (an object left empty counting as none),
// metadata.deletionTimestamp, metadata.deletionGracePeriodSeconds, spec
// and status.  A member missing from both is equal; missing from one
// only, or null in one, is a difference.  Values are equal as JSON:
// objects whatever the order of their members, strings once escapes are
// decoded, numbers as written (1 and 1.0 differ).  A daemon restart
// stamps a new config.seen (and keeps an API pod's resourceVersion from
// the version it first stored): no change.  A text that is not JSON is
// never the same.  Cost: a comparison of the bytes when the texts are
// equal or differ only in config.seen as the daemon writes it (what a
// restart gives every unchanged pod); else both decoded.
func samePod(a, b string) bool {
	if a == b || sameButSeen(a, b) {
		return true
	}
	x, okx := comparedParts(a)
	y, oky := comparedParts(b)
	return okx && oky && reflect.DeepEqual(x, y)
}

// comparedParts is what samePod compares of one text, as values.
func comparedParts(text string) ([]any, bool) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	top, _ := v.(map[string]any)
	md, _ := top["metadata"].(map[string]any)
	var name any = absent{}
	if s, ok := md["name"].(string); ok {
		name = s
	}
	ns, _ := md["namespace"].(string)
	parts := []any{name, ns}
	for _, k := range comparedMeta {
		x, ok := md[k]
		if !ok {
			x = absent{}
		} else if ann, isObj := x.(map[string]any); isObj && k == "annotations" {
			for _, l := range localAnnotations {
				delete(ann, l)
			}
			if len(ann) == 0 {
				x = absent{}
			}
		}
		parts = append(parts, x)
	}
	for _, k := range comparedTop {
		x, ok := top[k]
		if !ok {
			x = absent{}
		}
		parts = append(parts, x)
	}
	return parts, true
}

const (
	textHead = `{"metadata":{"annotations":{`
	seenKey  = `"` + SeenAnnotation + `"`
)

// stringEnd is the end of the JSON string opening at s[i] (past its
// closing quote), or -1 if the text ends first.
func stringEnd(s string, i int) int {
	for i++; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// seenSpan is the span [start, end) of the member config.seen (name and
// value) in metadata.annotations, for a text laid out as the daemon
// writes pods: compact, annotations first, every annotation a string.
// False for any other text: then only the full comparison can tell.
func seenSpan(s string) (int, int, bool) {
	if !strings.HasPrefix(s, textHead) {
		return 0, 0, false
	}
	for i := len(textHead); i < len(s) && s[i] == '"'; {
		end := stringEnd(s, i)
		if end < 0 || end+1 >= len(s) || s[end] != ':' || s[end+1] != '"' {
			return 0, 0, false
		}
		value := stringEnd(s, end+1)
		if value < 0 || value >= len(s) {
			return 0, 0, false
		}
		if s[i:end] == seenKey {
			return i, value, true
		}
		if s[value] != ',' {
			return 0, 0, false
		}
		i = value + 1
	}
	return 0, 0, false
}

// sameButSeen: a and b are the same text but for the value of
// config.seen in their annotations (seenSpan).  O(text length).
func sameButSeen(a, b string) bool {
	as, ae, oka := seenSpan(a)
	bs, be, okb := seenSpan(b)
	return oka && okb && as == bs && a[:as] == b[:bs] && a[ae:] == b[be:]
}
