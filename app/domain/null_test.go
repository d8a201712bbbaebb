package domain_test

import (
	"testing"

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
}
