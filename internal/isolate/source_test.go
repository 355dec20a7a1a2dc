package isolate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// packageSource parses the package's non-test files.
func packageSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}

// TestKernelThroughOneFS: the controller reads and writes the kernel only
// through the kernel.FS it is handed (STYLE rule 3), never a hard-coded
// mount and never a pair of bare root strings that callers can swap.
func TestKernelThroughOneFS(t *testing.T) {
	fset, files := packageSource(t)
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && (s == "/proc" || s == "/sys" || strings.HasPrefix(s, "/proc/") || strings.HasPrefix(s, "/sys/")) {
					t.Errorf("%s: hard-coded %q: read it through a kernel.FS", fset.Position(n.Pos()), s)
				}
			case *ast.FuncType:
				for _, p := range n.Params.List {
					id, ok := p.Type.(*ast.Ident)
					if !ok || id.Name != "string" {
						continue
					}
					for _, pn := range p.Names {
						if strings.HasSuffix(strings.ToLower(pn.Name), "root") {
							t.Errorf("%s: parameter %s is a root string: take a kernel.FS", fset.Position(pn.Pos()), pn.Name)
						}
					}
				}
			}
			return true
		})
	}
}

// TestFunctionsReadInOneScreen: no function of the controller is longer
// than 80 lines; a longer one is split into named steps (as Decide is).
func TestFunctionsReadInOneScreen(t *testing.T) {
	const most = 80
	fset, files := packageSource(t)
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > most {
				t.Errorf("%s: %s is %d lines, more than %d: split it into named steps", fset.Position(fd.Pos()), fd.Name.Name, n, most)
			}
		}
	}
}
