package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/stockhold/stockhold/app/reconcile"
	"github.com/stockhold/stockhold/app/rollbacks"
	"github.com/stockhold/stockhold/app/stock"
)

// funcs are the helpers templates use to show values the way a person
// reads them.
var funcs = template.FuncMap{
	"when":    when,
	"ago":     ago,
	"outcome": reconcile.Outcome,
	"str":     str,
	"num":     num,
	"pct":     pct,
	"path":    url.PathEscape,
	"query":   url.QueryEscape,
	"delta":   delta,
	"scope":   scope,
	"short":   short,
	"sid":     sid,
	"json":    prettyJSON,
	"ttl":     func(i pgtype.Interval) string { return (time.Duration(i.Microseconds) * time.Microsecond).String() },
	"add":     func(a, b int32) int64 { return int64(a) + int64(b) },
	"dict":    dict,
	"by":      by,
	"units":   units,
	"ms":      ms,
	"join":    func(s []string) string { return strings.Join(s, ", ") },
	"states":  states,
	"ref":     ref,
	"noun":    noun,
}

// noun is one when n is 1, many otherwise, so a count reads "1 hold",
// "2 holds", "0 holds".
func noun(n any, one, many string) string {
	if num(n) == "1" {
		return one
	}
	return many
}

// ref shows a ledger row's reference, a transfer's id shortened to its
// first eight characters (the whole id is the title).
func ref(r *string) template.HTML {
	if r == nil {
		return ""
	}
	if len(*r) == 36 && strings.Count(*r, "-") == 4 {
		return template.HTML(`<code title="` + template.HTMLEscapeString(*r) + `">` + template.HTMLEscapeString((*r)[:8]) + `</code>`)
	}
	return template.HTML(template.HTMLEscapeString(*r))
}

// states says how a movement moved the states not for sale, incoming,
// short and the units promised past what is on hand ("damaged +2,
// incoming -3", "backordered +3, expected 2026-12-07"), or "—" when it
// moved none.
func states(m stock.Movement) string {
	var parts []string
	for _, s := range []struct {
		name string
		n    int64
	}{{"quality control", m.DeltaQualityControl}, {"damaged", m.DeltaDamaged}, {"safety stock", m.DeltaSafetyStock}, {"incoming", m.DeltaIncoming},
		{"short", m.DeltaShort}, {"backordered", m.DeltaBackordered}} {
		if s.n != 0 {
			parts = append(parts, s.name+" "+delta(s.n))
		}
	}
	if m.ExpectedOn != "" {
		parts = append(parts, "expected "+m.ExpectedOn)
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// ms shows a duration in milliseconds, to the hundredth.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

// units lists a movement's units: the first four and how many more.
func units(ids []string) string {
	out := strings.Join(ids[:min(len(ids), 4)], " ")
	if len(ids) > 4 {
		out += fmt.Sprintf(" +%d", len(ids)-4)
	}
	return out
}

// by shows who did something: the operator as claimed, and the key that
// authenticated it when that is another name (a claim any ops key can
// make, so the key is what can be checked).
func by(name any, key *string) string {
	n := str(name)
	if key == nil || *key == n {
		return n
	}
	return n + " (key " + *key + ")"
}

// short is the first eight characters of an id, enough to tell holds
// apart on a phone.
func short(v any) string {
	var s string
	switch x := v.(type) {
	case fmt.Stringer:
		s = x.String()
	default:
		s = str(v)
	}
	return s[:min(8, len(s))]
}

// dict builds a map for a sub-template from key, value pairs.
func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, fmt.Errorf("dict needs key, value pairs")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict key %v is not a string", kv[i])
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

// when shows a time in UTC to the second; nil or zero is a dash.
func when(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x != nil {
			t = *x
		}
	}
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago shows how far a time is from now: "3m ago", "in 2h".
func ago(v any) string {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case *time.Time:
		if x == nil {
			return ""
		}
		t = *x
	}
	if t.IsZero() {
		return ""
	}
	d := time.Until(t)
	future := d > 0
	if !future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh", int(d.Hours()))
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

func str(v any) string {
	switch x := v.(type) {
	case *string:
		if x != nil {
			return *x
		}
	case string:
		return x
	case fmt.Stringer:
		return x.String()
	}
	return ""
}

// num shows a possibly-nil count; nil is a dash.
func num(v any) string {
	switch x := v.(type) {
	case *int32:
		if x != nil {
			return fmt.Sprint(*x)
		}
	case *int64:
		if x != nil {
			return fmt.Sprint(*x)
		}
	case int, int32, int64:
		return fmt.Sprint(x)
	}
	return "—"
}

func pct(r *float64) string {
	if r == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", *r*100)
}

func delta(n int64) string {
	if n > 0 {
		return fmt.Sprintf("+%d", n)
	}
	return fmt.Sprint(n)
}

// scope says in words which holds a rollback covers.
func scope(s rollbacks.Scope) string {
	out := "—"
	switch {
	case len(s.ReservationIDs) > 0:
		ids := make([]string, 0, 3)
		for _, id := range s.ReservationIDs[:min(3, len(s.ReservationIDs))] {
			ids = append(ids, id.String()[:8])
		}
		more := ""
		if len(s.ReservationIDs) > 3 {
			more = fmt.Sprintf(" and %d more", len(s.ReservationIDs)-3)
		}
		out = fmt.Sprintf("%d %s: %s%s", len(s.ReservationIDs), noun(len(s.ReservationIDs), "hold", "holds"), strings.Join(ids, ", "), more)
	case s.Campaign != "":
		out = "campaign " + s.Campaign
	case s.SKU != "":
		out = fmt.Sprintf("SKU %s, pool %s", s.SKU, s.Pool)
		if s.HeldBefore != nil {
			out += ", held before " + when(s.HeldBefore)
		}
	}
	if s.Cutoff != nil {
		out += ", made before " + when(s.Cutoff)
	}
	return out
}

func prettyJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}
