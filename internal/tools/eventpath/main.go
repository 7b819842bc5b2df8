// Command eventpath checks the stream layer's call structure along an
// event's path: from the functions named as roots (by default the
// partition consumer, Pipeline.consume, and the publisher's loop), it
// follows the whole program's call graph (VTA: calls through interfaces
// and function values resolved to what can flow there, calls through the
// libraries followed back into the layer) and draws an edge from file A
// to file B of the layer wherever a function of A calls one of B. It
// prints the strongly connected sets of that graph: files an event's calls
// can leave and come back to. It exits 1 if there is one, so that an
// event's calls, from fetch to offset commit, enter each file of the
// layer without returning to one they left.
//
// The graph is static: every call that can happen on some path from the
// roots, error paths and every configuration's included, so it holds more
// than any one event's calls do.
//
// Run from this directory (it is a module of its own, so that the
// analysis library is not a dependency of the service):
//
//	go run . -dir ../../..
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/tools/go/callgraph/vta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

const module = "github.com/streamer/streamer/"

func main() {
	dir := flag.String("dir", ".", "the repository's root")
	scope := flag.String("scope", "stream/", "the layer: files whose path (from -dir) starts with this")
	pkg := flag.String("main", "./cmd/streamer", "the program to analyse")
	verbose := flag.Bool("v", false, "print every edge of the file graph with its calls")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: eventpath [flags] [root function ...]\n\nroots default to %s\n\n", strings.Join(defaultRoots, " "))
		flag.PrintDefaults()
	}
	flag.Parse()
	roots := flag.Args()
	if len(roots) == 0 {
		roots = defaultRoots
	}
	g, err := analyse(*dir, *pkg, *scope, roots)
	if err != nil {
		fail(err)
	}
	if *verbose {
		g.print(os.Stdout)
	}
	sets := g.cycles()
	fmt.Printf("%d files of %s on the path from %s; %d calls between them; %d sets of files that call each other\n",
		len(g.files), *scope, strings.Join(roots, ", "), g.calls(), len(sets))
	for _, set := range sets {
		fmt.Printf("\n%d files call each other: %s\n", len(set), strings.Join(set, " "))
		for _, e := range g.within(set) {
			fmt.Printf("  %s -> %s: %s\n", e[0], e[1], strings.Join(g.edges[e], "; "))
		}
	}
	if len(sets) > 0 {
		os.Exit(1)
	}
}

var defaultRoots = []string{
	"(*" + module + "stream.Pipeline).consume",
	"(*" + module + "stream.Publisher).loop",
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "eventpath:", err)
	os.Exit(2)
}

// graph is the file graph: for each edge (caller's file, callee's file),
// the calls that make it ("caller -> callee", sorted).
type graph struct {
	files map[string]bool
	edges map[[2]string][]string
}

func analyse(dir, pkg, scope string, roots []string) (*graph, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	cfg := &packages.Config{Mode: packages.LoadAllSyntax, Dir: dir}
	pkgs, err := packages.Load(cfg, pkg)
	if err != nil {
		return nil, err
	}
	if packages.PrintErrors(pkgs) > 0 {
		return nil, fmt.Errorf("%s does not load", pkg)
	}
	prog, _ := ssautil.AllPackages(pkgs, ssa.InstantiateGenerics)
	prog.Build()
	all := ssautil.AllFunctions(prog)
	cg := vta.CallGraph(all, nil)

	// fileOf is f's file relative to dir ("" outside it); a closure or a
	// wrapper without a position takes its parent's.
	fileOf := func(f *ssa.Function) string {
		for f != nil && !f.Pos().IsValid() {
			f = f.Parent()
		}
		if f == nil {
			return ""
		}
		rel, err := filepath.Rel(dir, prog.Fset.Position(f.Pos()).Filename)
		if err != nil || strings.HasPrefix(rel, "..") || strings.HasSuffix(rel, "_test.go") {
			return ""
		}
		return filepath.ToSlash(rel)
	}
	inScope := func(file string) bool { return file != "" && strings.HasPrefix(file, scope) }

	// A breadth-first walk over (function, the layer's file the calls
	// were last in): a call out of the layer (into a library, or another
	// package of the program) is followed with that file, so that a call
	// back into the layer through it is an edge from that file.
	type state struct {
		f    *ssa.Function
		from string
	}
	g := &graph{files: map[string]bool{}, edges: map[[2]string][]string{}}
	calls := map[[2]string]map[string]bool{}
	seen := map[state]bool{}
	var queue []state
	want := map[string]bool{}
	for _, r := range roots {
		want[r] = true
	}
	for f := range all {
		if want[f.String()] {
			delete(want, f.String())
			s := state{f, fileOf(f)}
			seen[s] = true
			queue = append(queue, s)
			g.files[s.from] = true
		}
	}
	if len(want) > 0 {
		return nil, fmt.Errorf("no function %s in %s", strings.Join(slices.Sorted(maps.Keys(want)), ", "), pkg)
	}
	caller := map[state]*ssa.Function{} // the layer's function the walk left it from
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		n := cg.Nodes[s.f]
		if n == nil {
			continue
		}
		last := s.f // the layer's function (or the root) whose call this is
		if c, ok := caller[s]; ok {
			last = c
		}
		for _, e := range n.Out {
			callee := e.Callee.Func
			next := state{callee, s.from}
			if file := fileOf(callee); inScope(file) {
				next.from = file
				g.files[file] = true
				if file != s.from {
					k := [2]string{s.from, file}
					if calls[k] == nil {
						calls[k] = map[string]bool{}
					}
					calls[k][short(last)+" -> "+short(callee)] = true
				}
			}
			if !inScope(fileOf(callee)) && !ours(callee) {
				continue // not followed: see ours
			}
			if !seen[next] {
				seen[next] = true
				if !inScope(fileOf(callee)) {
					caller[next] = last
				}
				queue = append(queue, next)
			}
		}
	}
	for k, cs := range calls {
		g.edges[k] = slices.Sorted(maps.Keys(cs))
	}
	return g, nil
}

// ours reports whether f is the program's own (its module's, outside
// the layer: the models, the configuration, the snapshots). The walk
// follows calls into those packages and back, and not into the standard
// library or other modules: the call graph is not sensitive to context,
// and through fmt, sort, sync or an errors library every function value
// and method that reaches them anywhere in the program would seem to be
// called from everywhere.
func ours(f *ssa.Function) bool {
	for f.Parent() != nil {
		f = f.Parent()
	}
	if f.Origin() != nil {
		f = f.Origin()
	}
	return f.Pkg != nil && strings.HasPrefix(f.Pkg.Pkg.Path(), module)
}

func short(f *ssa.Function) string { return strings.ReplaceAll(f.String(), module, "") }

func (g *graph) calls() int {
	n := 0
	for _, cs := range g.edges {
		n += len(cs)
	}
	return n
}

func (g *graph) sortedEdges() [][2]string {
	es := slices.Collect(maps.Keys(g.edges))
	sort.Slice(es, func(i, j int) bool { return es[i][0]+"\x00"+es[i][1] < es[j][0]+"\x00"+es[j][1] })
	return es
}

func (g *graph) print(w *os.File) {
	for _, e := range g.sortedEdges() {
		fmt.Fprintf(w, "%s -> %s\t%s\n", e[0], e[1], strings.Join(g.edges[e], "; "))
	}
}

// within returns the edges between files of set.
func (g *graph) within(set []string) [][2]string {
	var es [][2]string
	for _, e := range g.sortedEdges() {
		if slices.Contains(set, e[0]) && slices.Contains(set, e[1]) {
			es = append(es, e)
		}
	}
	return es
}

// cycles returns the graph's strongly connected sets of more than one
// file (Tarjan's algorithm), each sorted.
func (g *graph) cycles() [][]string {
	adj := map[string][]string{}
	for _, e := range g.sortedEdges() {
		adj[e[0]] = append(adj[e[0]], e[1])
	}
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var sets [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range adj[v] {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var set []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			set = append(set, w)
			if w == v {
				break
			}
		}
		if len(set) > 1 {
			sort.Strings(set)
			sets = append(sets, set)
		}
	}
	for _, v := range slices.Sorted(maps.Keys(g.files)) {
		if _, ok := index[v]; !ok {
			visit(v)
		}
	}
	return sets
}
