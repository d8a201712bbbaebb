package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/config"
)

// TestEnvFileReadsAlikeInShellAndSystemd sources stockhold.env in a POSIX
// shell, as docs/OPERATIONS.md does, with every commented default turned
// on, and requires the shell to see exactly what systemd's
// EnvironmentFile= rules (config.ParseEnvFile) read: DATABASE_URL, whose &
// an unquoted line would end a shell command at, included.
func TestEnvFileReadsAlikeInShellAndSystemd(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("stockhold.env")
	require.NoError(t, err)
	require.Contains(t, config.ExampleDatabaseURL, "&", "the example URL has an &, as real ones do")
	all := regexp.MustCompile(`(?m)^#([A-Z][A-Z0-9_]*=)`).ReplaceAllString(string(raw), "$1")
	file := filepath.Join(t.TempDir(), "stockhold.env")
	require.NoError(t, os.WriteFile(file, []byte(all), 0o600))

	vars, problems := config.ParseEnvFile(all)
	require.Empty(t, problems)
	require.Len(t, vars, len(config.Settings), "every setting, on")
	var names []string
	for _, v := range vars {
		names = append(names, v.Name)
	}
	script := `set -a; . "$1"; set +a; for n in ` + strings.Join(names, " ") + `; do printf '%s=%s\0' "$n" "$(printenv "$n")"; done`
	out, err := exec.Command("sh", "-c", script, "sh", file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	shell := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	require.Len(t, shell, len(vars))
	for i, v := range vars {
		require.Equal(t, v.Name+"="+v.Value, shell[i], "the shell reads %s as systemd does", v.Name)
	}
	require.Equal(t, "DATABASE_URL="+config.ExampleDatabaseURL, shell[0])
}
