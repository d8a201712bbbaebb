package api

import (
	"strconv"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// decodeHold is decode for a hold's body, the API's busiest: a plain body
// is read by parseHold, in a fraction of encoding/json's time (decoding
// was a tenth of the server's CPU on a refused hold); any other goes
// through decodeJSON, which says what is wrong with it.
func decodeHold(c echo.Context, h *holdBody) error {
	body, err := readBody(c, false)
	if err != nil {
		return err
	}
	if parseHold(body, h) {
		return nil
	}
	// Decoded into a value of its own, which goes to the heap (json takes
	// an any), so that h need not on every hold.
	var decoded holdBody
	err = decodeJSON(body, &decoded)
	*h = decoded
	return err
}

// parseHold reads body into h if it is a plain hold body, and reports
// whether it was; h is then exactly what decodeJSON would have decoded,
// without error. Plain is one JSON object whose keys are holdBody's fields
// spelled as they are, each at most once, as are its lines' keys; whose
// strings hold valid UTF-8 with neither an escape nor a control character;
// whose whole numbers have at most 18 digits, written without fraction or
// exponent; with no null; with only whitespace after it. Anything else
// (including every body decodeJSON refuses) is not plain, and h is left
// partly filled. TestParseHoldAgreesWithDecodeJSON holds it to this.
func parseHold(body []byte, h *holdBody) bool {
	p := holdParser{b: body}
	if !p.holdBody(h) {
		return false
	}
	p.space()
	return p.i == len(p.b)
}

type holdParser struct {
	b []byte
	i int
}

func (p *holdParser) holdBody(h *holdBody) bool {
	var seen [7]bool
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "order_ref":
			return firstTime(&seen[0]) && p.string(&h.OrderRef)
		case "customer_ref":
			return firstTime(&seen[6]) && p.string(&h.CustomerRef)
		case "items":
			return firstTime(&seen[1]) && p.items(&h.Items)
		case "ttl_seconds":
			h.TTLSeconds = new(int64)
			return firstTime(&seen[2]) && p.int(h.TTLSeconds)
		case "campaign":
			h.Campaign = new(string)
			return firstTime(&seen[3]) && p.string(h.Campaign)
		case "strategy":
			h.Strategy = new(string)
			return firstTime(&seen[4]) && p.string(h.Strategy)
		case "ship_to":
			h.ShipTo = &shipTo{}
			return firstTime(&seen[5]) && p.shipTo(h.ShipTo)
		}
		return false
	})
}

func (p *holdParser) shipTo(s *shipTo) bool {
	var seen [2]bool
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "latitude":
			s.Latitude = new(float64)
			return firstTime(&seen[0]) && p.float(s.Latitude)
		case "longitude":
			s.Longitude = new(float64)
			return firstTime(&seen[1]) && p.float(s.Longitude)
		}
		return false
	})
}

func (p *holdParser) items(items *[]holdItem) bool {
	*items = make([]holdItem, 0, 1)
	return p.array(func() bool {
		var it holdItem
		var seen [8]bool
		ok := p.object(func(key []byte) bool {
			switch string(key) {
			case "sku":
				return firstTime(&seen[0]) && p.string(&it.SKU)
			case "quantity":
				return firstTime(&seen[1]) && p.int(&it.Quantity)
			case "units":
				return firstTime(&seen[2]) && p.strings(&it.Units)
			case "adjacent":
				return firstTime(&seen[3]) && p.bool(&it.Adjacent)
			case "location":
				return firstTime(&seen[4]) && p.string(&it.Location)
			case "split":
				return firstTime(&seen[5]) && p.bool(&it.Split)
			case "partial":
				return firstTime(&seen[6]) && p.bool(&it.Partial)
			case "min_quantity":
				return firstTime(&seen[7]) && p.int(&it.MinQuantity)
			}
			return false
		})
		*items = append(*items, it)
		return ok
	})
}

func (p *holdParser) strings(list *[]string) bool {
	*list = []string{}
	return p.array(func() bool {
		var s string
		ok := p.string(&s)
		*list = append(*list, s)
		return ok
	})
}

// firstTime reports whether a key is seen for the first time, and marks it.
func firstTime(seen *bool) bool {
	was := *seen
	*seen = true
	return !was
}

// object reads an object, calling member for each key with the parser at
// its value.
func (p *holdParser) object(member func(key []byte) bool) bool {
	p.space()
	if !p.take('{') {
		return false
	}
	p.space()
	if p.take('}') {
		return true
	}
	for {
		p.space()
		key, ok := p.raw()
		if !ok {
			return false
		}
		p.space()
		if !p.take(':') {
			return false
		}
		p.space()
		if !member(key) {
			return false
		}
		p.space()
		if p.take('}') {
			return true
		}
		if !p.take(',') {
			return false
		}
	}
}

// array reads an array, calling elem for each element with the parser at
// it.
func (p *holdParser) array(elem func() bool) bool {
	if !p.take('[') {
		return false
	}
	p.space()
	if p.take(']') {
		return true
	}
	for {
		p.space()
		if !elem() {
			return false
		}
		p.space()
		if p.take(']') {
			return true
		}
		if !p.take(',') {
			return false
		}
	}
}

// raw reads a plain string (see parseHold) and returns its bytes.
func (p *holdParser) raw() ([]byte, bool) {
	if !p.take('"') {
		return nil, false
	}
	start := p.i
	ascii := true
	for ; p.i < len(p.b); p.i++ {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, ascii || utf8.Valid(s)
		case c < 0x20 || c == '\\':
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

func (p *holdParser) string(s *string) bool {
	b, ok := p.raw()
	*s = string(b)
	return ok
}

// int reads a whole number of at most 18 digits (no int64 overflows).
func (p *holdParser) int(n *int64) bool {
	neg := p.take('-')
	start := p.i
	var v int64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + int64(p.b[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.b[start] == '0') || !p.ends() {
		return false
	}
	if neg {
		v = -v
	}
	*n = v
	return true
}

// float reads a number of the form -?(0|[1-9][0-9]*)(.[0-9]+)?, at most 17
// digits in all (what a coordinate needs; encoding/json reads it the same,
// with strconv.ParseFloat); anything else is not plain.
func (p *holdParser) float(f *float64) bool {
	start := p.i
	p.take('-')
	digits, first := 0, p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
		digits++
	}
	if digits == 0 || (digits > 1 && p.b[first] == '0') {
		return false
	}
	if p.take('.') {
		frac := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			frac++
		}
		if frac == 0 {
			return false
		}
		digits += frac
	}
	if digits > 17 || !p.ends() {
		return false
	}
	v, err := strconv.ParseFloat(string(p.b[start:p.i]), 64)
	*f = v
	return err == nil
}

func (p *holdParser) bool(v *bool) bool {
	for _, lit := range [...]string{"true", "false"} {
		if len(p.b)-p.i >= len(lit) && string(p.b[p.i:p.i+len(lit)]) == lit {
			p.i += len(lit)
			*v = lit == "true"
			return p.ends()
		}
	}
	return false
}

// ends reports whether a number or a literal ends here, as JSON requires:
// at the end, a space, or the next delimiter.
func (p *holdParser) ends() bool {
	if p.i == len(p.b) {
		return true
	}
	switch p.b[p.i] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

func (p *holdParser) take(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *holdParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}
