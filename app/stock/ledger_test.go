package stock_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stockhold/stockhold/app/dbtest"
	"github.com/stockhold/stockhold/app/stock"
)

// TestLedgerKindsMatchTheCheck: every kind the ledger's CHECK ledger_kind
// allows has a constant, and every constant is a kind the CHECK allows, as
// the migrated database has it.
func TestLedgerKindsMatchTheCheck(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	var def string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'ledger'::regclass AND conname = 'ledger_kind'`).Scan(&def))
	var allowed []string
	for _, m := range regexp.MustCompile(`'([a-z_]+)'::text`).FindAllStringSubmatch(def, -1) {
		allowed = append(allowed, m[1])
	}
	require.NotEmpty(t, allowed, "no kinds read from %s", def)
	var listed []string
	for _, k := range stock.LedgerKinds {
		listed = append(listed, string(k))
	}
	require.ElementsMatch(t, allowed, listed, "the CHECK ledger_kind (%s) against stock.LedgerKinds", def)
	require.ElementsMatch(t, declaredKinds(t), listed, "the LedgerKind constants against stock.LedgerKinds")
}

// declaredKinds are the values of the LedgerKind constants the package's
// source declares.
func declaredKinds(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "LedgerKind" {
					continue
				}
				for _, val := range v.Values {
					s, err := strconv.Unquote(val.(*ast.BasicLit).Value)
					require.NoError(t, err)
					out = append(out, s)
				}
			}
		}
	}
	return out
}
