package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
)

// encoding/json matches an object's keys to fields without regard to case
// and lets the last of a repeated key win, so {"quantity":1,"Quantity":5}
// decodes as 5 and {"ITEMS":[...]} as items. checkKeys walks a body that
// has already decoded (so it is well-formed JSON) beside the type it
// decoded into and refuses, with the key's path, a key that is not spelled
// exactly as its field, and a key given twice in one object (for a struct,
// twice up to case). Objects decoded into a map, an interface or a type
// with its own UnmarshalJSON may have any keys, each once.
//
// It is a plain scan over the bytes, with no allocation unless a key holds
// an escape or an object has more keys than seenInline, so a hold body
// costs a fraction of its decoding.
func checkKeys(body []byte, t reflect.Type) error {
	s := keyScanner{b: body}
	return s.value(schemaOf(t))
}

// schema is what checkKeys knows of a type: the fields of a struct by their
// exact JSON names, or the element of a slice or array. nil means anything
// goes (a map, an interface, a scalar, a type that decodes itself).
type schema struct {
	fields map[string]*field
	elem   *schema
}

type field struct {
	name string
	typ  reflect.Type
	// sub is filled on first use: types may be recursive.
	once sync.Once
	sub  *schema
}

func (f *field) schema() *schema {
	f.once.Do(func() { f.sub = schemaOf(f.typ) })
	return f.sub
}

var (
	schemas       sync.Map // reflect.Type -> *schema
	unmarshalerT  = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshal = reflect.TypeFor[encoding.TextUnmarshaler]()
)

func schemaOf(t reflect.Type) *schema {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := schemas.Load(t); ok {
		return s.(*schema)
	}
	var s *schema
	switch {
	case reflect.PointerTo(t).Implements(unmarshalerT) || reflect.PointerTo(t).Implements(textUnmarshal):
	case t.Kind() == reflect.Struct:
		s = &schema{fields: map[string]*field{}}
		addFields(s, t)
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		if e := schemaOf(t.Elem()); e != nil {
			s = &schema{elem: e}
		}
	}
	actual, _ := schemas.LoadOrStore(t, s)
	return actual.(*schema)
}

// addFields adds t's fields as encoding/json names them, those of embedded
// structs without a name of their own inlined.
func addFields(s *schema, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addFields(s, ft)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := s.fields[name]; !taken {
			s.fields[name] = &field{name: name, typ: f.Type}
		}
	}
}

// keyScanner walks well-formed JSON. stack is where it is in the body (its
// first maxPath steps), turned into a path (items[0].quantity) only for an
// error; a fixed array, so that a scan allocates nothing.
type keyScanner struct {
	b     []byte
	i     int
	depth int
	stack [maxPath]step
}

const maxPath = 16

// step is an object's key, or for an array element (key nil) its index.
type step struct {
	key   []byte
	index int
}

func (s *keyScanner) push(st step) {
	if s.depth < maxPath {
		s.stack[s.depth] = st
	}
	s.depth++
}

func (s *keyScanner) pop() { s.depth-- }

func (s *keyScanner) path(key []byte) string {
	var b strings.Builder
	for _, st := range s.stack[:min(s.depth, maxPath)] {
		if st.key == nil {
			fmt.Fprintf(&b, "[%d]", st.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.Write(st.key)
	}
	if s.depth > maxPath {
		b.WriteString("...")
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.Write(key)
	return b.String()
}

// seenInline is how many keys of one object are compared pairwise before
// a map takes over; the API's objects have far fewer.
const seenInline = 16

func (s *keyScanner) value(sc *schema) error {
	s.space()
	if s.i >= len(s.b) {
		return nil
	}
	switch s.b[s.i] {
	case '{':
		return s.object(sc)
	case '[':
		return s.array(sc)
	case '"':
		if _, nul := s.skipString(); nul {
			return s.nul(nil)
		}
	default:
		s.skipLiteral()
	}
	return nil
}

func (s *keyScanner) object(sc *schema) error {
	s.i++ // {
	// A struct's keys must differ beyond case (encoding/json would match
	// either to the same field); a map's need only differ.
	fields := sc != nil && sc.fields != nil
	var (
		inline [seenInline][]byte
		seen   = inline[:0]
		folded map[string][]byte
	)
	for {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] == '}' {
			s.i++
			return nil
		}
		if s.b[s.i] == ',' {
			s.i++
			continue
		}
		key, nul := s.key()
		if nul {
			return s.nul(key)
		}
		if folded == nil && len(seen) < seenInline {
			for _, k := range seen {
				if same(k, key, fields) {
					return s.repeated(k, key)
				}
			}
			seen = append(seen, key)
		} else {
			if folded == nil {
				folded = make(map[string][]byte, 2*seenInline)
				for _, k := range seen {
					folded[fold(k, fields)] = k
				}
			}
			f := fold(key, fields)
			if k, dup := folded[f]; dup {
				return s.repeated(k, key)
			}
			folded[f] = key
		}
		var sub *schema
		if fields {
			f, ok := sc.fields[string(key)]
			if !ok {
				return s.unknownKey(sc, key)
			}
			sub = f.schema()
		}
		s.space()
		s.i++ // :
		s.push(step{key: key})
		err := s.value(sub)
		s.pop()
		if err != nil {
			return err
		}
	}
}

func (s *keyScanner) array(sc *schema) error {
	s.i++ // [
	var elem *schema
	if sc != nil {
		elem = sc.elem
	}
	for n := 0; ; n++ {
		s.space()
		if s.i >= len(s.b) || s.b[s.i] == ']' {
			s.i++
			return nil
		}
		s.push(step{index: n})
		err := s.value(elem)
		s.pop()
		if err != nil {
			return err
		}
		s.space()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
		}
	}
}

// key reads an object's key as encoding/json would decode it (escapes
// resolved: "\u0069tems" is items), as a slice of the body when it has no
// escape, and reports whether it holds a NUL.
func (s *keyScanner) key() (key []byte, nul bool) {
	start := s.i
	escaped, nul := s.skipString()
	raw := s.b[start:min(s.i, len(s.b))]
	if len(raw) < 2 {
		return raw, nul
	}
	if !escaped {
		return raw[1 : len(raw)-1], nul
	}
	var k string
	if err := json.Unmarshal(raw, &k); err != nil {
		return raw, nul
	}
	return []byte(k), nul
}

// skipString moves past a string and reports whether it held an escape,
// and whether one of them was \u0000: a NUL, which neither text nor
// jsonb can hold in PostgreSQL.
func (s *keyScanner) skipString() (escaped, nul bool) {
	s.i++ // "
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case '\\':
			escaped = true
			nul = nul || bytes.HasPrefix(s.b[s.i+1:], []byte("u0000"))
			s.i += 2
			continue
		case '"':
			s.i++
			return escaped, nul
		}
		s.i++
	}
	return escaped, nul
}

func (s *keyScanner) skipLiteral() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return
		}
		s.i++
	}
}

func (s *keyScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func same(a, b []byte, ignoreCase bool) bool {
	if ignoreCase {
		return bytes.EqualFold(a, b)
	}
	return bytes.Equal(a, b)
}

func fold(k []byte, ignoreCase bool) string {
	if ignoreCase {
		return strings.ToLower(string(k))
	}
	return string(k)
}

// nul refuses a string holding \u0000 (the value at the scanner's path,
// or the key given), naming where: 422, since the body reads but breaks a
// rule (PostgreSQL stores no NUL in text or jsonb).
func (s *keyScanner) nul(key []byte) error {
	where := s.path(key)
	if key == nil {
		where = strings.TrimSuffix(s.path(nil), ".")
	}
	if where == "" {
		where = "the body"
	}
	return newProblem(http.StatusUnprocessableEntity, "invalid_request",
		fmt.Sprintf("%s contains a NUL character (\\u0000), which cannot be stored: leave it out", where))
}

func (s *keyScanner) repeated(first, again []byte) error {
	if bytes.Equal(first, again) {
		return badRequest(fmt.Sprintf("field %s appears twice: give each field once", s.path(again)))
	}
	return badRequest(fmt.Sprintf("fields %s and %s differ only in case: give each field once, spelled as documented",
		s.path(first), s.path(again)))
}

func (s *keyScanner) unknownKey(sc *schema, key []byte) error {
	for name := range sc.fields {
		if strings.EqualFold(name, string(key)) {
			return badRequest(fmt.Sprintf("unknown field %q: field names are case-sensitive (%s)",
				s.path(key), s.path([]byte(name))))
		}
	}
	return badRequest(fmt.Sprintf("unknown field %q", s.path(key)))
}
