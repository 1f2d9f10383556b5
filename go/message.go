package podmux

// One line of the update stream (doc/protocol.md) decoded: the pods it
// carries become pods holding their exact text, the other members are
// read only once the type is known.  The same checks, in the same order,
// as the C library's src/client/client_msg.c, so that a line one client
// rejects the other rejects too.

import (
	"fmt"
	"math"
)

type msgType uint8

const (
	msgOther msgType = iota // a type this package does not know: ignored
	msgHello
	msgPods
	msgSynced
	msgSourcesReady
	msgPlugin
	msgError
	msgSource
)

var msgTypes = map[string]msgType{
	"hello": msgHello, "pods": msgPods, "synced": msgSynced,
	"sources_ready": msgSourcesReady, "plugin": msgPlugin, "error": msgError,
	"source": msgSource,
}

type message struct {
	typ msgType
	seq uint64
	// hello
	protocol   int64
	mode, node string
	// pods
	op     Op
	source string
	pods   []Pod
	// synced
	resumed bool
	// sources_ready
	sources []string
	// plugin: pluginOp is its op, plugin.JSON the "plugin" member's text
	pluginOp  string
	plugin    Plugin
	hasPlugin bool
	errorText string
	// error
	reason, text string
	// source: source is the source's name; state its word; the
	// checkpoint's time and resource_version ("" when absent)
	state, cpTime, cpRV string
}

// errProtocolVersion: a hello with a protocol number other than Protocol.
type errProtocolVersion struct{ protocol int64 }

func (e errProtocolVersion) Error() string {
	return fmt.Sprintf("protocol %d", e.protocol)
}

// member is one member of the line other than "pods" and "plugin", kept
// as the span of its value until the type is known.  key is its name
// (in the line, or decoded).
type member struct {
	key  []byte
	a, b int
}

type lineParser struct {
	walker
	m *message
	// The members: the first ones in fixed (a protocol 1 message has at
	// most 7), the rest in extra.
	n     int
	fixed [8]member
	extra []member
	// The last "pods" and "plugin" members (typedMember).
	pods, plugin typedAt
}

// typedAt is where the line's last "pods" or "plugin" member's value
// starts, and whether the message holds it already: walked as it was
// met when the type read before it wanted it (the daemon writes "type"
// first).
type typedAt struct {
	have, walked bool
	at           int
}

// parseLine decodes one line (without its newline).  The error is a
// badLine (the line is not a protocol 1 message) or an
// errProtocolVersion (a hello of another protocol: nothing else of it
// was read).
func parseLine(line []byte) (*message, error) {
	p := lineParser{walker: walker{s: line}, m: &message{}}
	if err := p.walkLine(); err != nil {
		return nil, err
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.m, nil
}

// walkLine: one JSON object, and nothing after it but white space.
func (p *lineParser) walkLine() error {
	p.ws()
	if p.pos >= len(p.s) || p.s[p.pos] != '{' {
		return p.bad("a line that is not a JSON object")
	}
	p.pos++
	if !p.at('}') {
		for {
			if err := p.walkMember(); err != nil {
				return err
			}
			if p.at('}') {
				break
			}
			if p.pos >= len(p.s) || p.s[p.pos] != ',' {
				return p.bad("expected ',' or '}'")
			}
			p.pos++
		}
	}
	p.ws()
	if p.pos < len(p.s) {
		return p.bad("text after the JSON object")
	}
	return nil
}

// walkMember: "pods" and "plugin" as typedMember says (a repeated one
// replaces the earlier), any other member is kept as a span.
func (p *lineParser) walkMember() error {
	p.ws()
	if p.pos >= len(p.s) || p.s[p.pos] != '"' {
		return p.bad("expected a member name")
	}
	a, b, escaped, err := p.str()
	if err != nil {
		return err
	}
	key := p.s[a:b]
	if !isPlain(key, escaped) {
		key = []byte(decode(key, escaped))
	}
	p.ws()
	if p.pos >= len(p.s) || p.s[p.pos] != ':' {
		return p.bad("expected ':'")
	}
	p.pos++
	switch string(key) {
	case "pods":
		return p.typedMember(msgPods)
	case "plugin":
		return p.typedMember(msgPlugin)
	}
	p.ws()
	start := p.pos
	if err := p.value(0); err != nil {
		return err
	}
	v := member{key: key, a: start, b: p.pos}
	if p.n < len(p.fixed) {
		p.fixed[p.n] = v
		p.n++
	} else {
		p.extra = append(p.extra, v)
	}
	return nil
}

// typedMember reads the value of a "pods" or "plugin" member, the last
// of its name so far: walked into the message if the type read before it
// is the one it belongs to, else stepped over (its syntax checked) and
// left to finishTyped, which walks it only in a message of that type.  A
// member of another message is one this package does not know, ignored
// as any other (doc/protocol.md).
func (p *lineParser) typedMember(typ msgType) error {
	p.ws()
	t := p.typed(typ)
	*t = typedAt{have: true, at: p.pos}
	if p.typeSoFar() == typ {
		if err := p.walkTyped(typ); err == nil {
			t.walked = true
			return nil
		}
		// A value of the wrong shape is judged once the type is
		// final: a later "type" may still make it another's.
		p.dropTyped(typ)
		p.pos = t.at
	}
	if typ == msgPods {
		return p.value(-1) // a pod's depth does not count the array (walkPod)
	}
	return p.value(0)
}

func (p *lineParser) typed(typ msgType) *typedAt {
	if typ == msgPods {
		return &p.pods
	}
	return &p.plugin
}

// typeSoFar is the message's type as far as the line was read: msgOther
// until a string "type" was met.
func (p *lineParser) typeSoFar() msgType {
	if v, have := p.get("type"); have && p.kind(v) == '"' {
		return msgTypes[p.strOf(v)]
	}
	return msgOther
}

// walkTyped walks the "pods" or "plugin" value at p.pos into the
// message, in place of what it held.
func (p *lineParser) walkTyped(typ msgType) error {
	p.dropTyped(typ)
	if typ == msgPods {
		return p.walkPods()
	}
	return p.walkPlugin()
}

func (p *lineParser) dropTyped(typ msgType) {
	if typ == msgPods {
		p.m.pods = p.m.pods[:0]
		return
	}
	p.m.plugin, p.m.hasPlugin = Plugin{}, false
}

// finishTyped: once the type is known, the message keeps the "pods" or
// "plugin" member of its own type, walked now if it was only stepped
// over, and holds none of the other.
func (p *lineParser) finishTyped() error {
	for _, typ := range [...]msgType{msgPods, msgPlugin} {
		t := p.typed(typ)
		switch {
		case p.m.typ != typ:
			p.dropTyped(typ)
		case t.have && !t.walked:
			p.pos = t.at
			if err := p.walkTyped(typ); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *lineParser) walkPods() error {
	p.ws()
	if p.pos >= len(p.s) || p.s[p.pos] != '[' {
		return p.bad("pods is not an array")
	}
	p.pos++
	if p.at(']') {
		return nil
	}
	for {
		pod, err := p.walkPod()
		if err != nil {
			return err
		}
		p.m.pods = append(p.m.pods, pod)
		p.ws()
		if p.pos >= len(p.s) {
			return p.bad("the pods array is not closed")
		}
		if p.s[p.pos] == ']' {
			p.pos++
			return nil
		}
		if p.s[p.pos] != ',' {
			return p.bad("expected ',' or ']' in pods")
		}
		p.pos++
	}
}

// walkPlugin: the "plugin" object, its text, and its socket, type and
// name.
func (p *lineParser) walkPlugin() error {
	p.ws()
	start := p.pos
	var sock, typ, name strField
	isObj, err := p.objectValue(0, func(key []byte, d int) error {
		switch string(key) {
		case "socket":
			return p.strField(d, &sock)
		case "type":
			return p.strField(d, &typ)
		case "name":
			return p.strField(d, &name)
		}
		return p.value(d)
	})
	if err != nil {
		return err
	}
	if !isObj || !sock.have {
		return badLine("\"plugin\" is not an object with a socket")
	}
	text := string(p.s[start:p.pos])
	p.m.plugin = Plugin{
		JSON:   text,
		Socket: sock.in(text, start),
		Type:   typ.in(text, start),
		Name:   name.in(text, start),
	}
	p.m.hasPlugin = true
	return nil
}

// get returns the last member named key (a later duplicate wins, as in
// json-c).
func (p *lineParser) get(key string) (member, bool) {
	for i := len(p.extra) - 1; i >= 0; i-- {
		if string(p.extra[i].key) == key {
			return p.extra[i], true
		}
	}
	for i := p.n - 1; i >= 0; i-- {
		if string(p.fixed[i].key) == key {
			return p.fixed[i], true
		}
	}
	return member{}, false
}

// kind is the first byte of a member's value: '"', '{', '[', 't', 'f',
// 'n', or '0' for a number.
func (p *lineParser) kind(v member) byte {
	switch c := p.s[v.a]; c {
	case '"', '{', '[', 't', 'f', 'n':
		return c
	}
	return '0'
}

func (p *lineParser) strOf(v member) string {
	w := walker{s: p.s, pos: v.a}
	a, b, escaped, _ := w.str()
	raw := p.s[a:b]
	if isPlain(raw, escaped) {
		// The names every message carries, without a copy.
		for _, s := range common {
			if string(raw) == s {
				return s
			}
		}
	}
	return decode(raw, escaped)
}

var common = [...]string{"pods", "file", "api", "http", "*", "ADD", "UPDATE", "REMOVE", "DELETE", "RECONCILE", "SET",
	"plugin", "REGISTERED", "DEREGISTERED", "synced", "hello", "sources_ready"}

// intOf reads an integer member the way json-c holds it: an integer
// literal that fits 64 bits (signed, or unsigned above INT64_MAX); asInt
// is json-c's int64 view of it (INT64_MAX for a larger unsigned one).
func (p *lineParser) intOf(v member) (neg bool, mag uint64, ok bool) {
	t := p.s[v.a:v.b]
	if len(t) > 0 && t[0] == '-' {
		neg = true
		t = t[1:]
	}
	for _, c := range t {
		if !isDigit(c) {
			return false, 0, false // a fraction or an exponent: a double
		}
		d := uint64(c - '0')
		if mag > (math.MaxUint64-d)/10 {
			return false, 0, false
		}
		mag = mag*10 + d
	}
	if neg && mag > 1<<63 {
		return false, 0, false
	}
	return neg, mag, true
}

// wantStr reads a string member: absent is "" (an error if required), a
// value of another type is an error.
func (p *lineParser) wantStr(key string, required bool) (string, bool, error) {
	v, have := p.get(key)
	if !have {
		if required {
			return "", false, badLine(fmt.Sprintf("no \"%s\"", key))
		}
		return "", false, nil
	}
	if p.kind(v) != '"' {
		return "", false, badLine(fmt.Sprintf("\"%s\" is not a string", key))
	}
	return p.strOf(v), true, nil
}

func (p *lineParser) readSeq(missing string) error {
	v, have := p.get("seq")
	if have && p.kind(v) == '0' {
		if neg, mag, ok := p.intOf(v); ok && (!neg || mag == 0) {
			p.m.seq = mag
			return nil
		}
	}
	return badLine(missing)
}

// finish reads the type, the number, and the members of that type.
func (p *lineParser) finish() error {
	m := p.m
	v, have := p.get("type")
	if !have || p.kind(v) != '"' {
		return badLine("a message without a string \"type\"")
	}
	m.typ = msgTypes[p.strOf(v)]
	if err := p.finishTyped(); err != nil {
		return err
	}
	// A hello's seq is checked after its protocol: a peer of another
	// protocol is told that first, whatever else its hello lacks.
	if m.typ != msgHello {
		if err := p.readSeq("a message without a non-negative integer \"seq\""); err != nil {
			return err
		}
	}
	var err error
	switch m.typ {
	case msgHello:
		err = p.finishHello()
	case msgPods:
		err = p.finishPods()
	case msgSynced:
		err = p.finishSynced()
	case msgSourcesReady:
		err = p.finishSourcesReady()
	case msgPlugin:
		err = p.finishPlugin()
	case msgError:
		err = p.finishError()
	case msgSource:
		err = p.finishSource()
	}
	if err != nil {
		return err
	}
	if m.typ == msgHello {
		return p.readSeq("a hello without a non-negative integer \"seq\"")
	}
	return nil
}

func (p *lineParser) finishHello() error {
	v, have := p.get("protocol")
	var neg, ok bool
	var mag uint64
	if have && p.kind(v) == '0' {
		neg, mag, ok = p.intOf(v)
	}
	if !ok {
		return badLine("a hello without an integer protocol")
	}
	switch {
	case neg:
		p.m.protocol = int64(-mag) // two's complement: -2^63 stays itself
	case mag > math.MaxInt64:
		p.m.protocol = math.MaxInt64
	default:
		p.m.protocol = int64(mag)
	}
	if p.m.protocol != Protocol {
		return errProtocolVersion{p.m.protocol}
	}
	var err error
	if p.m.mode, _, err = p.wantStr("mode", false); err != nil {
		return err
	}
	p.m.node, _, err = p.wantStr("node", false)
	return err
}

func (p *lineParser) finishPods() error {
	op, _, err := p.wantStr("op", true)
	if err != nil {
		return err
	}
	var ok bool
	if p.m.op, ok = parseOp(op); !ok {
		return badLine(fmt.Sprintf("unknown op \"%s\"", op))
	}
	if p.m.source, _, err = p.wantStr("source", true); err != nil {
		return err
	}
	// In a SET (the merged state) or a "*" message each pod's source is
	// its own annotation, elsewhere the message's.
	for i, pod := range p.m.pods {
		want := p.m.source
		if (p.m.op == OpSet || p.m.source == "*") && pod.p.annSource != "" {
			want = pod.p.annSource
		}
		if want != pod.p.source {
			d := *pod.p
			d.source = want
			p.m.pods[i] = Pod{&d}
		}
	}
	return nil
}

func (p *lineParser) finishSynced() error {
	v, have := p.get("resumed")
	if !have {
		return nil
	}
	switch p.kind(v) {
	case 't':
		p.m.resumed = true
	case 'f':
	default:
		return badLine("\"resumed\" is not a boolean")
	}
	return nil
}

func (p *lineParser) finishSourcesReady() error {
	v, have := p.get("sources")
	if !have || p.kind(v) != '[' {
		return badLine("\"sources\" is not an array")
	}
	w := walker{s: p.s, pos: v.a + 1}
	p.m.sources = []string{}
	if w.at(']') {
		return nil
	}
	for {
		w.ws()
		if w.s[w.pos] != '"' {
			return badLine("a source name is not a string")
		}
		a, b, escaped, _ := w.str()
		p.m.sources = append(p.m.sources, decode(w.s[a:b], escaped))
		if w.at(']') {
			return nil
		}
		w.at(',')
	}
}

func (p *lineParser) finishPlugin() error {
	if !p.m.hasPlugin {
		return badLine("a plugin message without \"plugin\"")
	}
	var err error
	if p.m.pluginOp, _, err = p.wantStr("op", true); err != nil {
		return err
	}
	p.m.errorText, _, err = p.wantStr("error", false)
	return err
}

func (p *lineParser) finishError() error {
	var err error
	if p.m.reason, _, err = p.wantStr("reason", true); err != nil {
		return err
	}
	p.m.text, _, err = p.wantStr("message", false)
	return err
}

// finishSource: its source, state and, when there, the checkpoint's time
// and resource_version (an absent or null "checkpoint" is none; a null
// member is absent).  The last of a repeated member counts, as in json-c.
func (p *lineParser) finishSource() error {
	var err error
	if p.m.source, _, err = p.wantStr("source", true); err != nil {
		return err
	}
	if p.m.state, _, err = p.wantStr("state", true); err != nil {
		return err
	}
	v, have := p.get("checkpoint")
	if !have || p.kind(v) == 'n' {
		return nil
	}
	if p.kind(v) != '{' {
		return badLine("\"checkpoint\" is not an object")
	}
	var tm, rv member
	w := walker{s: p.s, pos: v.a}
	if _, err := w.objectValue(0, func(key []byte, d int) error {
		w.ws()
		m := member{key: key, a: w.pos}
		if err := w.value(d); err != nil {
			return err
		}
		m.b = w.pos
		switch string(key) {
		case "time":
			tm = m
		case "resource_version":
			rv = m
		}
		return nil
	}); err != nil {
		return err
	}
	for _, f := range []struct {
		m   member
		dst *string
	}{{tm, &p.m.cpTime}, {rv, &p.m.cpRV}} {
		if f.m.key == nil || p.kind(f.m) == 'n' {
			continue
		}
		if p.kind(f.m) != '"' {
			return badLine("a member of \"checkpoint\" is not a string")
		}
		*f.dst = p.strOf(f.m)
	}
	return nil
}
