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

// TestKernelThroughOneFS: the controller reads and writes the kernel only
// through the kernel.FS it is handed (STYLE rule 3), never a hard-coded
// mount and never a pair of bare root strings that callers can swap.
func TestKernelThroughOneFS(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
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
