package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseEnvFile reads each form systemd's EnvironmentFile= takes.
func TestParseEnvFile(t *testing.T) {
	t.Parallel()
	text := strings.Join([]string{
		"# a comment",
		"; another",
		"",
		"PLAIN=postgres://u@h/db?a=1&b=2   ",
		"  INDENTED = x",
		"SINGLE='it\\'s $HOME \\n' ",
		`DOUBLE="a \"b\" \\ \$x \n"`,
		"MULTI='line one",
		"line two'",
		"JOINED=one\\",
		"two",
		`ESCAPED=a\ b\\c`,
		"EMPTY=",
		"EMPTY_QUOTED=''",
		"export NOPE=1",
		"NOEQUALS",
		"TWICE=1",
		"TWICE=2",
		"OPEN='never closed: the rest of the file is its value",
		"LOST=1",
	}, "\n")
	vars, problems := ParseEnvFile(text)
	got := map[string]string{}
	lines := map[string]int{}
	for _, v := range vars {
		got[v.Name], lines[v.Name] = v.Value, v.Line
	}
	require.Equal(t, map[string]string{
		"PLAIN":        "postgres://u@h/db?a=1&b=2",
		"INDENTED":     "x",
		"SINGLE":       `it\`,
		"DOUBLE":       `a "b" \ $x \n`,
		"MULTI":        "line one\nline two",
		"JOINED":       "onetwo",
		"ESCAPED":      `a b\c`,
		"EMPTY":        "",
		"EMPTY_QUOTED": "",
		"TWICE":        "2",
	}, got)
	require.Equal(t, 8, lines["MULTI"])
	require.Equal(t, 18, lines["TWICE"], "the last assignment wins")
	require.Len(t, problems, 4, "%q", problems)
	require.Contains(t, problems[0], "line 6: SINGLE: text after the closing quote")
	require.Contains(t, problems[1], `line 15: "export NOPE" is not a variable name`)
	require.Contains(t, problems[2], "line 16: no NAME=value")
	require.Contains(t, problems[3], "line 19: OPEN: the quote is never closed")
}

func TestUnknownOf(t *testing.T) {
	t.Parallel()
	got := UnknownOf([]string{"PATH", "STOCKHOLD_ADDR", "STOCKHOLD_ADRR", "STOCKHOLD_WORKER", "STOCKHOLD_BANANA", "STOCKHOLD_TEST_CHILD"})
	require.Equal(t, []Unknown{
		{Name: "STOCKHOLD_ADRR", Suggestion: "STOCKHOLD_ADDR"},
		{Name: "STOCKHOLD_WORKER", Suggestion: "STOCKHOLD_WORKERS"},
		{Name: "STOCKHOLD_BANANA"},
	}, got)
}

// TestEnvFileQuotesEveryValue: the generated file quotes each value, and
// no default holds a quote that would end it early.
func TestEnvFileQuotesEveryValue(t *testing.T) {
	t.Parallel()
	for _, s := range Settings {
		require.NotContains(t, s.Default, "'", s.Name)
	}
	vars, problems := ParseEnvFile(EnvFile())
	require.Empty(t, problems)
	require.Equal(t, []EnvVar{{Name: "DATABASE_URL", Value: ExampleDatabaseURL, Line: vars[0].Line}}, vars)
}
