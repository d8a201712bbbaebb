package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The types whose Kind field names an alert's kind: what a domain package
// raises (alerts.Raise), what the inventory and stock services hand the wiring to
// raise (stock.Alert), and the row the one query that inserts alerts
// writes.
var alertKindHolders = []string{
	"github.com/stockhold/stockhold/app/alerts.Raise",
	"github.com/stockhold/stockhold/app/stock.Alert",
	"github.com/stockhold/stockhold/app/db.AlertRaiseParams",
}

// TestAlertKinds ties the Alert schema's kind enum to the code: the enum
// lists exactly the kinds the code can raise, and the schema's description
// says what each means. The kinds are read from the module's source, type
// checked: every value written to the Kind field of a type in
// alertKindHolders (in a composite literal or an assignment) must be a
// constant, a variable or parameter every value of which is one, a call
// of a function that returns one, or a Kind field of those types read and
// passed on; anything else fails the test, since its kinds cannot be
// known.
func TestAlertKinds(t *testing.T) {
	raised, err := raisedAlertKinds()
	if err != nil {
		t.Fatal(err)
	}
	if len(raised) < 10 {
		t.Fatalf("found %d alert kinds in the source, which cannot be all: %v", len(raised), raised)
	}
	doc := loadOpenAPI(t)
	kind := doc["components"].(map[string]any)["schemas"].(map[string]any)["Alert"].(map[string]any)["properties"].(map[string]any)["kind"].(map[string]any)
	listed := map[string]bool{}
	enum, _ := kind["enum"].([]any)
	for _, k := range enum {
		listed[k.(string)] = true
	}
	description, _ := kind["description"].(string)
	for k, where := range raised {
		if !listed[k] {
			t.Errorf("the code raises alert kind %q (%s), which the Alert schema's kind enum in openapi.json does not list: "+
				"add it to the enum, and a line on it to the kind's description", k, strings.Join(where, ", "))
		}
	}
	for k := range listed {
		if _, ok := raised[k]; !ok {
			t.Errorf("the Alert schema's kind enum lists %q, which no code raises", k)
		}
		if !strings.Contains(description, "- `"+k+"`") {
			t.Errorf("the Alert schema's kind description has no line \"- `%s`: ...\" saying what it means", k)
		}
	}
}

// raisedAlertKinds returns every alert kind the module's code can raise,
// each with where it is written.
func raisedAlertKinds() (map[string][]string, error) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	// Every package of the module, type checked from its source against
	// its dependencies' export data.
	cmd := exec.Command(goCmd, "list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles,Module", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w\n%s", err, stderr.String())
	}
	type pkg struct {
		ImportPath, Export, Dir string
		GoFiles                 []string
		Module                  *struct{ Path string }
	}
	exports := map[string]string{}
	var own []pkg
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == "github.com/stockhold/stockhold" {
			own = append(own, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	found := map[string][]string{}
	for _, p := range own {
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				return nil, err
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{},
			Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
		if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
			return nil, fmt.Errorf("type check %s: %w", p.ImportPath, err)
		}
		k := &kindReader{fset: fset, files: files, info: info}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					if !isKindHolder(info.TypeOf(n)) {
						return true
					}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "Kind" {
								k.record(kv.Value)
							}
						} else {
							k.fail(el, "an alert written without field names")
						}
					}
				case *ast.AssignStmt:
					for i, lhs := range n.Lhs {
						if sel, ok := lhs.(*ast.SelectorExpr); ok && k.kindField(sel) {
							if len(n.Rhs) != len(n.Lhs) {
								k.fail(n, "a Kind assigned from a call of several results")
								continue
							}
							k.record(n.Rhs[i])
						}
					}
				}
				return true
			})
		}
		if len(k.errs) > 0 {
			return nil, fmt.Errorf("%s", strings.Join(k.errs, "\n"))
		}
		for kind, where := range k.kinds {
			found[kind] = append(found[kind], where...)
		}
	}
	return found, nil
}

// isKindHolder reports whether t is one of alertKindHolders (or a pointer
// to one).
func isKindHolder(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	if !ok || n.Obj().Pkg() == nil {
		return false
	}
	return slices.Contains(alertKindHolders, n.Obj().Pkg().Path()+"."+n.Obj().Name())
}

// kindReader finds the values an expression of one package can have.
type kindReader struct {
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
	kinds map[string][]string
	errs  []string
	// seen guards against following a variable or function twice.
	seen map[types.Object]bool
}

func (k *kindReader) fail(n ast.Node, what string) {
	k.errs = append(k.errs, fmt.Sprintf("%s: %s: cannot tell which alert kinds it raises; name each with a constant",
		k.fset.Position(n.Pos()), what))
}

// kindField reports whether sel is the Kind field of a kind holder.
func (k *kindReader) kindField(sel *ast.SelectorExpr) bool {
	s := k.info.Selections[sel]
	return s != nil && s.Kind() == types.FieldVal && sel.Sel.Name == "Kind" && isKindHolder(s.Recv())
}

func (k *kindReader) record(e ast.Expr) {
	if k.kinds == nil {
		k.kinds = map[string][]string{}
	}
	k.seen = map[types.Object]bool{}
	for _, v := range k.values(e) {
		pos := k.fset.Position(e.Pos())
		k.kinds[v] = append(k.kinds[v], fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line))
	}
}

// values returns the strings e can be.
func (k *kindReader) values(e ast.Expr) []string {
	if tv, ok := k.info.Types[e]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		return []string{constant.StringVal(tv.Value)}
	}
	switch e := e.(type) {
	case *ast.ParenExpr:
		return k.values(e.X)
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			var out []string
			for _, x := range k.values(e.X) {
				for _, y := range k.values(e.Y) {
					out = append(out, x+y)
				}
			}
			return out
		}
	case *ast.SelectorExpr:
		if k.kindField(e) {
			return nil // passed on: its values are those written to it
		}
	case *ast.Ident:
		if v, ok := k.info.Uses[e].(*types.Var); ok {
			return k.varValues(e, v)
		}
	case *ast.CallExpr:
		if id := calledFunc(e); id != nil {
			if f, ok := k.info.Uses[id].(*types.Func); ok {
				return k.returnValues(e, f)
			}
		}
	}
	k.fail(e, fmt.Sprintf("the alert kind %s", types.ExprString(e)))
	return nil
}

// varValues returns the values of variable v: those assigned to it, or for
// a parameter those passed to it at every call of its function.
func (k *kindReader) varValues(at ast.Node, v *types.Var) []string {
	if k.seen[v] {
		return nil
	}
	k.seen[v] = true
	var out []string
	found := false
	for _, f := range k.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for i, lhs := range n.Lhs {
					if id, ok := lhs.(*ast.Ident); ok && (k.info.Defs[id] == v || k.info.Uses[id] == v) {
						found = true
						if len(n.Rhs) != len(n.Lhs) {
							k.fail(n, "a kind from a call of several results")
							continue
						}
						out = append(out, k.values(n.Rhs[i])...)
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if k.info.Defs[id] == v && i < len(n.Values) {
						found = true
						out = append(out, k.values(n.Values[i])...)
					}
				}
			case *ast.FuncDecl:
				if i := paramIndex(k.info, n.Type, v); i >= 0 {
					found = true
					fn := k.info.Defs[n.Name]
					calls := 0
					for _, g := range k.files {
						ast.Inspect(g, func(m ast.Node) bool {
							if call, ok := m.(*ast.CallExpr); ok {
								if id := calledFunc(call); id != nil && k.info.Uses[id] == fn && i < len(call.Args) {
									calls++
									out = append(out, k.values(call.Args[i])...)
								}
							}
							return true
						})
					}
					if calls == 0 {
						k.fail(at, "a parameter of "+n.Name.Name+", which no call in its package passes")
					}
				}
			}
			return true
		})
	}
	if !found {
		k.fail(at, "the variable "+v.Name())
	}
	return out
}

// returnValues returns what function f can return, when it is declared in
// this package.
func (k *kindReader) returnValues(at ast.Node, f *types.Func) []string {
	if k.seen[f] {
		return nil
	}
	k.seen[f] = true
	for _, file := range k.files {
		for _, d := range file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || k.info.Defs[fd.Name] != f || fd.Body == nil {
				continue
			}
			var out []string
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.FuncLit:
					return false
				case *ast.ReturnStmt:
					if len(n.Results) == 0 {
						k.fail(n, "a bare return")
					} else {
						out = append(out, k.values(n.Results[0])...)
					}
				}
				return true
			})
			return out
		}
	}
	k.fail(at, "a call of "+f.FullName()+", declared in another package")
	return nil
}

// calledFunc is the name a call calls: f(...), pkg.F(...) or x.m(...).
func calledFunc(call *ast.CallExpr) *ast.Ident {
	switch fun := call.Fun.(type) {
	case *ast.Ident:
		return fun
	case *ast.SelectorExpr:
		return fun.Sel
	}
	return nil
}

// paramIndex is v's index among ft's parameters, or -1.
func paramIndex(info *types.Info, ft *ast.FuncType, v *types.Var) int {
	i := 0
	for _, field := range ft.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, name := range field.Names {
			if info.Defs[name] == v {
				return i
			}
			i++
		}
	}
	return -1
}
