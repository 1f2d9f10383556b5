package podmux

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// SourceAnnotation is the annotation that names a pod's source in a SET.
const SourceAnnotation = "kubernetes.io/config.source"

// SeenAnnotation is the time the daemon first stored a pod.  A new run of
// the daemon stamps its own, so it is not part of what a resync compares
// (see Update).
const SeenAnnotation = "kubernetes.io/config.seen"

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

// samePod reports whether two texts of one pod (same source and UID) are
// the same pod for a resync: equal as JSON values (member order, white
// space and escapes aside; numbers in their spelling) once
// metadata.annotations["kubernetes.io/config.seen"] is removed from both,
// an annotations object left empty by that counting as absent.  That
// annotation is stamped by each run of the daemon, so a pod whose only
// difference is it is no change.
func samePod(a, b string) bool {
	if a == b {
		return true
	}
	x, okx := withoutSeen(a)
	y, oky := withoutSeen(b)
	return okx && oky && reflect.DeepEqual(x, y)
}

func withoutSeen(text string) (any, bool) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if obj, ok := v.(map[string]any); ok {
		if md, ok := obj["metadata"].(map[string]any); ok {
			if ann, ok := md["annotations"].(map[string]any); ok {
				delete(ann, SeenAnnotation)
				if len(ann) == 0 {
					delete(md, "annotations")
				}
			}
		}
	}
	return v, true
}
