package api

import (
	"errors"
	"fmt"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

// asProblem is an error whose As method finds a problem.
type asProblem struct{ p *problem }

func (a asProblem) Error() string { return "as" }
func (a asProblem) As(target any) bool {
	if t, ok := target.(**problem); ok {
		*t = a.p
		return true
	}
	return false
}

// sameAs checks errorAs[T] against errors.As on err.
func sameAs[T error](t *testing.T, err error) {
	t.Helper()
	var want T
	wantOK := errors.As(err, &want)
	got, ok := errorAs[T](err)
	require.Equal(t, wantOK, ok, "%v", err)
	require.Equal(t, want, got, "%v", err)
}

// TestErrorAsMatchesErrorsAs: errorAs finds what errors.As finds, on
// errors plain, wrapped, joined and with an As method.
func TestErrorAsMatchesErrorsAs(t *testing.T) {
	t.Parallel()
	de := &domain.Error{Code: domain.CodeOutOfStock, Detail: "gone"}
	p := newProblem(409, "conflict", "d")
	he := echo.NewHTTPError(404)
	for _, err := range []error{
		nil, errors.New("plain"), de, p, he, domain.ErrNotFound,
		fmt.Errorf("hold: %w", de), fmt.Errorf("a: %w", fmt.Errorf("b: %w", p)), fmt.Errorf("two: %w, %w", he, de),
		errors.Join(errors.New("x"), p), asProblem{p}, fmt.Errorf("wrapped: %w", asProblem{p}), (*domain.Error)(nil),
	} {
		sameAs[*domain.Error](t, err)
		sameAs[*problem](t, err)
		sameAs[*echo.HTTPError](t, err)
	}
}
