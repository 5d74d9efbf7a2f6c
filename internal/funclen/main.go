package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

func main() {
	limit := flag.Int("max", 120, "the most lines a function may have")
	allow := allowances{}
	flag.Var(allow, "allow", "FILE:FUNC=LINES: let one function be up to LINES long (repeatable)")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: funclen [-max lines] [-allow FILE:FUNC=LINES]... DIR...")
		os.Exit(2)
	}
	os.Exit(run(os.Stdout, os.Stderr, flag.Args(), *limit, allow))
}

// run checks the functions under dirs and prints one line per violation to out: exit status 0
// when there is none, 1 when there are, 2 when a file cannot be read or parsed.
func run(out, errOut io.Writer, dirs []string, limit int, allow allowances) int {
	var funcs []function
	for _, dir := range dirs {
		found, err := measure(dir)
		if err != nil {
			fmt.Fprintln(errOut, "funclen:", err)
			return 2
		}
		funcs = append(funcs, found...)
	}
	problems := check(funcs, limit, allow)
	for _, p := range problems {
		fmt.Fprintln(out, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(out, "funclen: %d problem(s): split long functions into named steps (limit %d lines)\n", len(problems), limit)
		return 1
	}
	return 0
}

// function is one function declaration and its length.
type function struct {
	file  string // slash-separated path as the walk found it
	line  int    // line of the func keyword
	name  string // as gocyclo names it
	lines int    // from the func keyword to the closing brace, both included
}

// key is how an -allow entry names the function.
func (f function) key() string { return f.file + ":" + f.name }

// measure returns the functions of every non-test, non-generated Go file under root.
func measure(root string) ([]function, error) {
	var funcs []function
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		found, err := measureFile(path)
		funcs = append(funcs, found...)
		return err
	})
	return funcs, err
}

// skipDir reports whether the go command leaves a directory of this name out of ./... patterns.
func skipDir(name string) bool {
	return name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// measureFile returns the functions of the Go file at path, none if it is generated.
func measureFile(path string) ([]function, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	if ast.IsGenerated(f) {
		return nil, nil
	}
	var funcs []function
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		funcs = append(funcs, function{
			file:  filepath.ToSlash(path),
			line:  start.Line,
			name:  funcName(fd),
			lines: end.Line - start.Line + 1,
		})
	}
	return funcs, nil
}

// funcName names fd as gocyclo does: the function's name, or "(T).M" / "(*T).M" for a method,
// without type parameters.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return "(" + typeName(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

// typeName is the receiver type t without its type parameters: T or *T.
func typeName(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.StarExpr:
		return "*" + typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.ParenExpr:
		return typeName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return fmt.Sprintf("%T", t)
}

// check returns the violations among funcs, sorted by file and line: functions over limit and
// over their allowance, then allowances that are no longer needed.
func check(funcs []function, limit int, allow allowances) []string {
	var problems []string
	used := map[string]bool{}
	sort.Slice(funcs, func(i, j int) bool {
		if funcs[i].file != funcs[j].file {
			return funcs[i].file < funcs[j].file
		}
		return funcs[i].line < funcs[j].line
	})
	for _, f := range funcs {
		allowed, ok := allow[f.key()]
		if ok {
			used[f.key()] = true
		}
		switch {
		case f.lines <= limit && ok:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is %d lines, within the limit of %d: remove its -allow entry",
				f.file, f.line, f.name, f.lines, limit))
		case f.lines <= limit:
		case !ok:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is %d lines, over the limit of %d",
				f.file, f.line, f.name, f.lines, limit))
		case f.lines > allowed:
			problems = append(problems, fmt.Sprintf("%s:%d: %s is %d lines, over the %d its -allow entry grants",
				f.file, f.line, f.name, f.lines, allowed))
		}
	}
	var stale []string
	for key := range allow {
		if !used[key] {
			stale = append(stale, fmt.Sprintf("-allow %s: no such function: remove the entry", key))
		}
	}
	sort.Strings(stale)
	return append(problems, stale...)
}

// allowances maps FILE:FUNC to the length that function may have; it is the -allow flag.
type allowances map[string]int

// String lists the entries, for flag's help output.
func (a allowances) String() string {
	var entries []string
	for key, n := range a {
		entries = append(entries, key+"="+strconv.Itoa(n))
	}
	sort.Strings(entries)
	return strings.Join(entries, " ")
}

// Set adds one FILE:FUNC=LINES entry.
func (a allowances) Set(entry string) error {
	key, n, ok := strings.Cut(entry, "=")
	lines, err := strconv.Atoi(n)
	if !ok || !strings.Contains(key, ":") || err != nil || lines < 1 {
		return fmt.Errorf("%q: want FILE:FUNC=LINES", entry)
	}
	a[key] = lines
	return nil
}
