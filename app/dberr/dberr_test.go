package dberr_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dberr"
	"github.com/stockhold/stockhold/app/domain"
)

func TestNotFound(t *testing.T) {
	t.Parallel()
	err := dberr.NotFound(fmt.Errorf("scan: %w", pgx.ErrNoRows), "webhook")
	var de *domain.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, domain.CodeNotFound, de.Code)
	require.Equal(t, "webhook not found", de.Detail)
	require.ErrorIs(t, err, domain.ErrNotFound)

	other := errors.New("connection reset")
	require.Same(t, other, dberr.NotFound(other, "webhook"))
	require.NoError(t, dberr.NotFound(nil, "webhook"))
}
