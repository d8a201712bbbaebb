package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

// TestProblemOfDomainErrors checks the one mapping of domain errors to
// problems: status by code, a not found the request refers to as 422, and
// the context members.
func TestProblemOfDomainErrors(t *testing.T) {
	t.Parallel()
	line := 3
	for name, c := range map[string]struct {
		err    error
		status int
		code   string
		extra  map[string]any
	}{
		"not found, wrapped": {fmt.Errorf("get: %w", domain.Missing("rollback")), http.StatusNotFound, "not_found", map[string]any{}},
		"key reused":         {fmt.Errorf("create: %w", domain.ErrKeyReused), http.StatusUnprocessableEntity, "idempotency_key_reused", map[string]any{}},
		"unknown SKU in the path": {&domain.Error{Code: domain.CodeUnknownSKU, SKU: "A1"}, http.StatusNotFound, "unknown_sku",
			map[string]any{"sku": "A1"}},
		"unknown SKU in a hold": {&domain.Error{Code: domain.CodeUnknownSKU, SKU: "A1", Pool: "main", Reference: true},
			http.StatusUnprocessableEntity, "unknown_sku", map[string]any{"sku": "A1", "pool": "main"}},
		"unknown campaign in a hold": {&domain.Error{Code: domain.CodeUnknownCampaign, Reference: true},
			http.StatusUnprocessableEntity, "unknown_campaign", map[string]any{}},
		"unknown SKU in a bulk line": {&domain.Error{Code: domain.CodeUnknownSKU, Line: &line, Reference: true},
			http.StatusUnprocessableEntity, "unknown_sku", map[string]any{"line": 3}},
		"unknown pool of a SKU": {&domain.Error{Code: domain.CodeUnknownPool, SKU: "A1", Pool: "c9", Reference: true},
			http.StatusUnprocessableEntity, "unknown_pool", map[string]any{"sku": "A1", "pool": "c9"}},
		"not held": {&domain.Error{Code: domain.CodeNotHeld, Status: "expired"}, http.StatusConflict, "reservation_not_held",
			map[string]any{"reservation_status": "expired"}},
		"invalid":  {domain.Invalid("bad"), http.StatusUnprocessableEntity, "invalid_request", map[string]any{}},
		"conflict": {&domain.Error{Code: domain.CodeConflict}, http.StatusConflict, "conflict", map[string]any{}},
		"busy":     {&domain.Error{Code: domain.CodeBusy}, http.StatusServiceUnavailable, "busy", map[string]any{}},
	} {
		p := problemOf(context.Background(), c.err)
		require.Equal(t, c.status, p.Status, name)
		require.Equal(t, c.code, p.Code, name)
		require.Equal(t, title(c.code), p.Title, name)
		require.Equal(t, c.extra, extraOf(p), name)
	}
	require.Equal(t, "this Idempotency-Key was used before with a different request",
		problemOf(context.Background(), domain.ErrKeyReused).Detail)
	require.Equal(t, retryBusy, problemOf(context.Background(), &domain.Error{Code: domain.CodeBusy}).RetryAfter)
}

// TestProblemOfTimeouts: a lock wait past lock_timeout and a statement past
// statement_timeout are both 503 busy, and the detail says which it was (a
// slow read is not a locked row).
func TestProblemOfTimeouts(t *testing.T) {
	t.Parallel()
	for code, detail := range map[string]string{
		"55P03": "locked by another transaction",
		"57014": "statement timeout (STOCKHOLD_DB_STATEMENT_TIMEOUT)",
	} {
		p := problemOf(context.Background(), fmt.Errorf("read: %w", &pgconn.PgError{Code: code}))
		require.Equal(t, http.StatusServiceUnavailable, p.Status, code)
		require.Equal(t, "busy", p.Code, code)
		require.Equal(t, retryBusy, p.RetryAfter, code)
		require.Contains(t, p.Detail, detail, code)
	}
}
