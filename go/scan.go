package podmux

// The JSON of one line, walked in place.  A line is read once: each value
// is checked as strict JSON (RFC 8259) while it is stepped over, and the
// few strings the client needs (member names, a pod's identity) are taken
// from where they lie.  What is accepted and rejected is what the C
// library's parser accepts and rejects (src/util/json_parse.c): no
// comments, no trailing commas, no leading zeros, no NaN, no raw control
// characters in strings, nesting at most maxDepth deep below a member of
// the line; bytes that are not UTF-8 are kept in the pod's text and
// decode as U+FFFD; a lone surrogate escape decodes as U+FFFD.
//
// Cost: one pass over the bytes; nothing is allocated but the strings
// the caller keeps.

import (
	"fmt"
	"unicode/utf8"
)

// maxDepth is how deeply a member's value may nest: the line, a pod, and
// a pod's own 64 levels (the C library's CLIENT_MSG_MAX_DEPTH).
const maxDepth = 72

// badLine is a line that is not a protocol message: why, in a sentence.
type badLine string

func (b badLine) Error() string { return string(b) }

type walker struct {
	s   []byte
	pos int
}

// fail is a syntax error inside a value.
func (w *walker) fail(what string) error {
	if w.pos >= len(w.s) {
		return badLine("unexpected end of JSON input")
	}
	return badLine(fmt.Sprintf("byte %d: %s", w.pos, what))
}

// bad is an error in the line's shape (outside any value).
func (w *walker) bad(what string) error {
	return badLine(fmt.Sprintf("byte %d: %s", w.pos, what))
}

func (w *walker) ws() {
	for w.pos < len(w.s) {
		switch w.s[w.pos] {
		case ' ', '\t', '\n', '\r':
			w.pos++
		default:
			return
		}
	}
}

// at reports whether the next byte (after white space) is c, and steps
// over it if so.
func (w *walker) at(c byte) bool {
	w.ws()
	if w.pos < len(w.s) && w.s[w.pos] == c {
		w.pos++
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// value steps over one value at depth (the number of arrays and objects
// it is inside, within the member being read).
func (w *walker) value(depth int) error {
	w.ws()
	if w.pos >= len(w.s) {
		return w.fail("")
	}
	switch c := w.s[w.pos]; c {
	case '{', '[':
		if depth >= maxDepth {
			return w.fail("nesting too deep")
		}
		if c == '{' {
			return w.object(depth + 1)
		}
		return w.array(depth + 1)
	case '"':
		_, _, _, err := w.str()
		return err
	case 't':
		return w.literal("true")
	case 'f':
		return w.literal("false")
	case 'n':
		return w.literal("null")
	default:
		if c == '-' || isDigit(c) {
			return w.number()
		}
		return w.fail("unexpected character")
	}
}

func (w *walker) object(depth int) error {
	w.pos++
	if w.at('}') {
		return nil
	}
	for {
		w.ws()
		if w.pos >= len(w.s) || w.s[w.pos] != '"' {
			return w.fail("expected a member name in an object")
		}
		if _, _, _, err := w.str(); err != nil {
			return err
		}
		if !w.at(':') {
			return w.fail("expected ':' after a member name")
		}
		if err := w.value(depth); err != nil {
			return err
		}
		if done, err := w.next('}', "expected ',' or '}' in an object"); done || err != nil {
			return err
		}
	}
}

func (w *walker) array(depth int) error {
	w.pos++
	if w.at(']') {
		return nil
	}
	for {
		if err := w.value(depth); err != nil {
			return err
		}
		if done, err := w.next(']', "expected ',' or ']' in an array"); done || err != nil {
			return err
		}
	}
}

// next steps over the ',' between members or elements (false), or the
// closing byte (true).
func (w *walker) next(closing byte, what string) (bool, error) {
	w.ws()
	if w.pos >= len(w.s) {
		return false, w.fail("")
	}
	switch w.s[w.pos] {
	case closing:
		w.pos++
		return true, nil
	case ',':
		w.pos++
		return false, nil
	}
	return false, w.fail(what)
}

func (w *walker) literal(word string) error {
	rest := w.s[w.pos:]
	n := len(word)
	if len(rest) < n {
		n = len(rest)
	}
	if string(rest[:n]) != word[:n] {
		return w.fail("unexpected character")
	}
	if n < len(word) {
		w.pos = len(w.s)
		return w.fail("")
	}
	w.pos += n
	return nil
}

func (w *walker) digits() {
	for w.pos < len(w.s) && isDigit(w.s[w.pos]) {
		w.pos++
	}
}

func (w *walker) number() error {
	if w.s[w.pos] == '-' {
		w.pos++
	}
	switch {
	case w.pos >= len(w.s):
		return w.fail("bad number")
	case w.s[w.pos] == '0':
		w.pos++
	case isDigit(w.s[w.pos]):
		w.digits()
	default:
		return w.fail("bad number")
	}
	if w.pos < len(w.s) && w.s[w.pos] == '.' {
		w.pos++
		if w.pos >= len(w.s) || !isDigit(w.s[w.pos]) {
			return w.fail("bad number")
		}
		w.digits()
	}
	if w.pos < len(w.s) && (w.s[w.pos] == 'e' || w.s[w.pos] == 'E') {
		w.pos++
		if w.pos < len(w.s) && (w.s[w.pos] == '+' || w.s[w.pos] == '-') {
			w.pos++
		}
		if w.pos >= len(w.s) || !isDigit(w.s[w.pos]) {
			return w.fail("bad number")
		}
		w.digits()
	}
	// As in the C parser, a number may not end the text: a line whose
	// member value is a number goes on with '}'.
	if w.pos >= len(w.s) {
		return w.fail("bad number")
	}
	return nil
}

func unhex(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

func hex4(b []byte) (rune, bool) {
	var v rune
	for _, c := range b[:4] {
		d, ok := unhex(c)
		if !ok {
			return 0, false
		}
		v = v<<4 | d
	}
	return v, true
}

func isHigh(r rune) bool { return r >= 0xd800 && r < 0xdc00 }
func isLow(r rune) bool  { return r >= 0xdc00 && r < 0xe000 }

// strStop marks the bytes a string's scan stops at: the closing quote, a
// backslash, a control character (an error).
var strStop = func() (t [256]bool) {
	t['"'], t['\\'] = true, true
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	return t
}()

// str steps over the string at w.pos (its opening quote).  [a, b) is its
// content between the quotes; escaped says whether it holds an escape.
func (w *walker) str() (a, b int, escaped bool, err error) {
	s := w.s
	i := w.pos + 1
	a = i
	for {
		for i < len(s) && !strStop[s[i]] {
			i++
		}
		if i >= len(s) {
			w.pos = len(s)
			return 0, 0, false, w.fail("unterminated string")
		}
		switch s[i] {
		case '"':
			w.pos = i + 1
			return a, i, escaped, nil
		case '\\':
			escaped = true
			if i, err = w.escape(i); err != nil {
				return 0, 0, false, err
			}
		default:
			w.pos = i
			return 0, 0, false, w.fail("control character in a string")
		}
	}
}

// isPlain reports whether a string's content is its value as it is: no
// escape, and valid UTF-8.
func isPlain(raw []byte, escaped bool) bool {
	return !escaped && utf8.Valid(raw)
}

// escape checks the escape whose backslash is at s[i]; the index after it.
func (w *walker) escape(i int) (int, error) {
	s := w.s
	if i+1 >= len(s) {
		w.pos = len(s)
		return 0, w.fail("unterminated string")
	}
	switch s[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, nil
	case 'u':
	default:
		w.pos = i + 1
		return 0, w.fail("bad escape in a string")
	}
	if i+5 >= len(s) {
		w.pos = len(s)
		return 0, w.fail("unterminated string")
	}
	cp, ok := hex4(s[i+2:])
	if !ok {
		w.pos = i + 1
		return 0, w.fail("bad \\u escape")
	}
	i += 6
	if isHigh(cp) && i < len(s) && s[i] == '\\' && i+5 >= len(s) {
		// The C parser reads a high surrogate's pair partner before the
		// rest; one that the text's end cuts is an unterminated string.
		w.pos = len(s)
		return 0, w.fail("unterminated string")
	}
	return i, nil
}

// decode is the value of a string's content checked by str(): escapes
// decoded, a byte that starts no UTF-8 sequence as U+FFFD, a lone
// surrogate as U+FFFD, and the value cut at its first NUL as the C
// library's strings are (so both clients read the same names).
func decode(raw []byte, escaped bool) string {
	if isPlain(raw, escaped) {
		return string(raw)
	}
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			var r rune
			r, i = unescape(raw, i)
			out = utf8.AppendRune(out, r)
		case c < 0x80:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, raw[i:i+n]...)
			}
			i += n
		}
	}
	for i, c := range out {
		if c == 0 {
			out = out[:i]
			break
		}
	}
	return string(out)
}

// unescape decodes the escape at raw[i] (checked by escape()).
func unescape(raw []byte, i int) (rune, int) {
	switch raw[i+1] {
	case 'b':
		return '\b', i + 2
	case 'f':
		return '\f', i + 2
	case 'n':
		return '\n', i + 2
	case 'r':
		return '\r', i + 2
	case 't':
		return '\t', i + 2
	case 'u':
	default:
		return rune(raw[i+1]), i + 2
	}
	cp, _ := hex4(raw[i+2:])
	i += 6
	switch {
	case isHigh(cp):
		if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
			if lo, ok := hex4(raw[i+2:]); ok && isLow(lo) {
				return 0x10000 + (cp-0xd800)<<10 + (lo - 0xdc00), i + 6
			}
		}
		return utf8.RuneError, i
	case isLow(cp):
		return utf8.RuneError, i
	}
	return cp, i
}

// objectValue steps over the value at w.pos, at depth d.  If it is an
// object, fn is called for each member with w.pos at the member's value,
// which fn steps over at the depth it is given; isObject says whether it
// was one.
func (w *walker) objectValue(d int, fn func(key []byte, d int) error) (isObject bool, err error) {
	w.ws()
	if w.pos >= len(w.s) || w.s[w.pos] != '{' {
		return false, w.value(d)
	}
	if d >= maxDepth {
		return false, w.fail("nesting too deep")
	}
	w.pos++
	if w.at('}') {
		return true, nil
	}
	for {
		w.ws()
		if w.pos >= len(w.s) || w.s[w.pos] != '"' {
			return true, w.fail("expected a member name in an object")
		}
		a, b, escaped, err := w.str()
		if err != nil {
			return true, err
		}
		key := w.s[a:b]
		if !isPlain(key, escaped) {
			key = []byte(decode(key, escaped))
		}
		if !w.at(':') {
			return true, w.fail("expected ':' after a member name")
		}
		if err := fn(key, d+1); err != nil {
			return true, err
		}
		if done, err := w.next('}', "expected ',' or '}' in an object"); done || err != nil {
			return true, err
		}
	}
}

// strField is where a member's string value lies in the line, if the
// member's (last) value is a string; plain: its content is its value.
type strField struct {
	a, b  int
	plain bool
	have  bool
}

// strField steps over the value at w.pos (depth d) and records it in f
// if it is a string; another value clears f, as a later duplicate member
// replaces an earlier one.
func (w *walker) strField(d int, f *strField) error {
	w.ws()
	if w.pos < len(w.s) && w.s[w.pos] == '"' {
		a, b, escaped, err := w.str()
		*f = strField{a: a, b: b, plain: err == nil && isPlain(w.s[a:b], escaped), have: err == nil}
		return err
	}
	*f = strField{}
	return w.value(d)
}

// in is the field's value, given text: the bytes of the line from
// offset start on, as a string (a plain value is a piece of it).
func (f strField) in(text string, start int) string {
	if !f.have {
		return ""
	}
	if f.plain {
		return text[f.a-start : f.b-start]
	}
	return decode([]byte(text[f.a-start:f.b-start]), true)
}
