package kinds_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestOptionalInterfacesChecked: every optional interface of the kinds (an interface of
// kinds.go or inspect.go other than Node, Link and Tunnel) has its contract checked in the
// integration tests of this package, which find a kind that has it by k.(kinds.NAME); a new one
// must get a check there.
func TestOptionalInterfacesChecked(t *testing.T) {
	var decls []ast.Decl
	for _, file := range []string{"kinds.go", "inspect.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	var checks strings.Builder
	for _, file := range []string{"contract_integration_test.go", "optional_integration_test.go"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checks.Write(b)
	}
	var found []string
	for _, d := range decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, s := range g.Specs {
			ts := s.(*ast.TypeSpec)
			if _, ok := ts.Type.(*ast.InterfaceType); !ok || ts.Name.Name == "Node" || ts.Name.Name == "Link" || ts.Name.Name == "Tunnel" {
				continue
			}
			found = append(found, ts.Name.Name)
			if !strings.Contains(checks.String(), "k.(kinds."+ts.Name.Name+")") {
				t.Errorf("kinds.%s has no contract check: add one to optional_integration_test.go (a kind that is a %s, found by k.(kinds.%s))", ts.Name.Name, ts.Name.Name, ts.Name.Name)
			}
		}
	}
	if len(found) < 13 {
		t.Errorf("found the optional interfaces %v; want the 13 there are (or more)", found)
	}
}
