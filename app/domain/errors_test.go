package domain_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

func TestErrorIsMatchesByCode(t *testing.T) {
	t.Parallel()
	wrapped := fmt.Errorf("get rollback 7: %w", domain.Missing("rollback"))
	require.ErrorIs(t, wrapped, domain.ErrNotFound)
	require.NotErrorIs(t, wrapped, domain.ErrKeyReused)

	reused := &domain.Error{Code: domain.CodeKeyReused, Detail: "key k made reservation r"}
	require.ErrorIs(t, reused, domain.ErrKeyReused)
	require.NotErrorIs(t, reused, domain.ErrNotFound)
	require.NotErrorIs(t, domain.Invalid("x"), domain.ErrNotFound)
	require.NotErrorIs(t, errors.New("not_found: plain"), domain.ErrNotFound)
}

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"A1", "bf-2026", "日本", strings.Repeat("x", domain.MaxNameLength)} {
		require.NoError(t, domain.ValidName("sku", ok), ok)
	}
	for name, bad := range map[string]string{
		"empty": "", "long": strings.Repeat("x", domain.MaxNameLength+1), "invalid UTF-8": "a\xffb",
		"space": " A1", "slash": "A/1", "control": "A\x001",
	} {
		err := domain.ValidName("sku", bad)
		require.ErrorIs(t, err, &domain.Error{Code: domain.CodeInvalid}, name)
		require.Contains(t, err.Error(), "sku ", name)
	}
}

func TestValidText(t *testing.T) {
	t.Parallel()
	require.NoError(t, domain.ValidText("reason", "two\tlines\nof text", 20))
	require.Error(t, domain.ValidText("reason", "too long", 3))
	require.Error(t, domain.ValidText("reason", "bell\a", 20))
	require.Error(t, domain.ValidText("reason", "\xff", 20))
}
