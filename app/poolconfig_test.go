package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPoolConfigMaxConns(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]int32{
		"postgres://u@localhost/db":                                 28,
		"postgres://u@localhost/db?pool_max_conns=7":                7,
		"host=localhost dbname=db pool_max_conns=9":                 9,
		"host=localhost dbname=db":                                  28,
		"postgres://u:pool_max_conns%3D3@localhost/pool_max_conns":  28, // the words, not the setting
		"postgres://u@localhost/db?application_name=pool_max_conns": 28,
	} {
		cfg, err := poolConfig(url, 28)
		require.NoError(t, err, url)
		require.Equal(t, want, cfg.MaxConns, url)
	}
	_, err := poolConfig("postgres://u@localhost/db?pool_max_conns=many", 28)
	require.ErrorContains(t, err, "DATABASE_URL")
}
