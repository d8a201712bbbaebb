package domain_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/domain"
)

func TestNullable(t *testing.T) {
	t.Parallel()
	require.Nil(t, domain.Optional(""))
	require.Equal(t, "x", *domain.Optional("x"))
	require.Empty(t, domain.Value[string](nil))
	n := int64(7)
	require.Equal(t, int64(7), domain.Value(&n))
	require.Nil(t, domain.UTC(nil))
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.FixedZone("CET", 3600))
	require.Equal(t, time.UTC, domain.UTC(&at).Location())
	require.True(t, domain.UTC(&at).Equal(at))
}
