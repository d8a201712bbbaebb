package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stockhold/stockhold/app/domain"
)

// MaxBody is the largest request body accepted.
const MaxBody = 64 << 10

// decode reads the body as exactly one JSON object into v, refusing unknown
// fields and trailing data. Every failure is a 400 (or 413) that says what
// is wrong.
func decode(c echo.Context, v any) error {
	return decodeBody(c, v, false)
}

// decodeOptional is decode for routes whose body may be empty.
func decodeOptional(c echo.Context, v any) error {
	return decodeBody(c, v, true)
}

func decodeBody(c echo.Context, v any, optional bool) error {
	body, err := readBody(c, optional)
	if err != nil || body == nil {
		return err
	}
	return decodeJSON(body, v)
}

// readBody reads the request's body, sent as JSON: nil when it is empty
// and optional.
func readBody(c echo.Context, optional bool) ([]byte, error) {
	// The BodyLimit middleware caps what this reads at MaxBody.
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var he *echo.HTTPError
		if errors.As(err, &he) {
			return nil, he
		}
		return nil, badRequest("could not read the request body")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, badRequest("the request body is empty; send a JSON object")
	}
	if err := jsonMediaType(c.Request().Header.Values(echo.HeaderContentType)); err != nil {
		return nil, err
	}
	return body, nil
}

// jsonMediaType refuses, with 415, a body sent as anything but
// application/json (with any parameters, such as charset): a form
// (what curl -d sends), text, or no Content-Type at all. A body read as
// JSON whatever it claims to be would let a browser's cross-site form
// post JSON without a preflight, and lets a client's mistake pass unseen.
func jsonMediaType(values []string) error {
	if len(values) == 1 {
		mt, _, _ := strings.Cut(values[0], ";")
		if strings.EqualFold(strings.TrimSpace(mt), echo.MIMEApplicationJSON) {
			return nil
		}
	}
	sent := "no Content-Type"
	if len(values) > 0 {
		sent = fmt.Sprintf("Content-Type %q", strings.Join(values, ", "))
	}
	return newProblem(http.StatusUnsupportedMediaType, "unsupported_media_type",
		fmt.Sprintf("the request body must be JSON sent with Content-Type: application/json; this one came with %s", sent))
}

// decodeJSON is the pure part of decoding, shared with the fuzz test:
// exactly one JSON value, no unknown fields, and every key spelled exactly
// as its field and given once (see checkKeys).
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("the request body has data after its JSON object")
	}
	return checkKeys(body, reflect.TypeOf(v))
}

func decodeError(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syntax):
		return badRequest(fmt.Sprintf("malformed JSON at byte %d: %s", syntax.Offset, syntax.Error()))
	case errors.As(err, &typ):
		if typ.Field == "" {
			return badRequest("the request body must be a JSON object")
		}
		return badRequest(fmt.Sprintf("field %s must be %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("the JSON body ends too early")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return badRequest("unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest("malformed JSON: " + err.Error())
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int32", "int64":
		return "a whole number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	}
	return goKind
}

// idempotencyKey returns the request's Idempotency-Key: 1 to 255 printable
// ASCII characters.
func idempotencyKey(c echo.Context) (string, error) {
	values := c.Request().Header.Values("Idempotency-Key")
	if len(values) == 0 {
		return "", newProblem(http.StatusBadRequest, "idempotency_key_missing",
			"this request creates something: send an Idempotency-Key header (1-255 printable ASCII characters) so it is safe to retry")
	}
	key := values[0]
	if err := checkIdempotencyKey(key); err != "" || len(values) > 1 {
		if len(values) > 1 {
			err = "send a single Idempotency-Key header"
		}
		return "", newProblem(http.StatusBadRequest, "idempotency_key_invalid", err)
	}
	return key, nil
}

func checkIdempotencyKey(key string) string {
	if key == "" || len(key) > 255 {
		return "the Idempotency-Key must be 1 to 255 characters long"
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "the Idempotency-Key must be printable ASCII"
		}
	}
	return ""
}

// maxPathParam bounds any path parameter; names and ids are far shorter.
const maxPathParam = 255

// pathParam returns a path parameter, unescaped where the client escaped
// it, and checked before it can reach a query: valid UTF-8 (400), at most
// 255 bytes and no control characters such as NUL (422).
func pathParam(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath != "" {
		u, err := url.PathUnescape(v)
		if err != nil {
			return "", badRequest(fmt.Sprintf("path parameter %s is not properly escaped", name))
		}
		v = u
	}
	switch {
	case !utf8.ValidString(v):
		return "", badRequest(fmt.Sprintf("path parameter %s is not valid UTF-8", name))
	case len(v) > maxPathParam:
		return "", domain.Invalid("path parameter %s is longer than %d bytes", name, maxPathParam)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "", domain.Invalid("path parameter %s contains a control character", name)
	}
	return v, nil
}

// cleanPath refuses, with 400, a path that is not valid UTF-8 or holds
// control characters, before a handler that does not check its own path
// (River UI's file server answers such paths 500) sees it.
func cleanPath() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := c.Request().URL.Path
			if !utf8.ValidString(p) || strings.IndexFunc(p, unicode.IsControl) >= 0 {
				return badRequest("the path must be valid UTF-8 without control characters")
			}
			return next(c)
		}
	}
}

// nameParam returns a path parameter that names a SKU or a campaign,
// checked as inventory.ValidName does (422 otherwise).
func nameParam(c echo.Context, name, what string) (string, error) {
	v, err := pathParam(c, name)
	if err != nil {
		return "", err
	}
	if err := domain.ValidName(what, v); err != nil {
		return "", err
	}
	return v, nil
}

// uuidParam returns a path parameter that must be a UUID.
func uuidParam(c echo.Context, name string) (uuid.UUID, error) {
	v, err := pathParam(c, name)
	if err != nil {
		return uuid.Nil, err
	}
	id, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		return uuid.Nil, badRequest(fmt.Sprintf("%s must be a UUID such as 0b7e9c1e-5a8f-4f63-9a55-2f1f6a1d9c3e", name))
	}
	return id, nil
}
