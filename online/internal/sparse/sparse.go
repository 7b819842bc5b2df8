// Package sparse holds the sparse rows of the models that keep their
// inputs — refit windows, support vectors, the exact kernel mode's budget
// — when the features are hashed (a 2^bits space, a few dozen nonzeros
// per event): a Row is its sorted distinct indices and their values; a
// Builder makes one from an event's (idx, val) with duplicates, in any
// order; a Ring keeps the last rows of a window in one arena without
// allocating once warm; an Index is an inverted index of a fixed set of
// rows, which gives the dot products of an input with all of them in
// O(rows + matches) instead of O(rows·nnz).
//
// Kernels on sparse rows use the identity ‖x − x'‖² = ‖x‖² + ‖x'‖² −
// 2<x, x'> (clamped at 0), with <x, x'> summed over the common indices in
// increasing order: identical rows have distance exactly 0.
package sparse

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// Row is a sparse vector: strictly increasing indices Idx with their
// values Val (same length, no zero values when made by a Builder).
type Row struct {
	Idx []int32
	Val []float64
}

// Len returns the number of stored entries.
func (r Row) Len() int { return len(r.Idx) }

// Sq returns ‖r‖², summed in index order.
func Sq(r Row) float64 {
	var s float64
	for _, v := range r.Val {
		s += v * v
	}
	return s
}

// Dot returns <a, b>: the products of the common indices summed in
// increasing index order (a merge of the two index lists, advanced
// without branches: the branch on which list is behind mispredicts half
// the time).
func Dot(a, b Row) float64 {
	ai, av := a.Idx, a.Val[:len(a.Idx)]
	bi, bv := b.Idx, b.Val[:len(b.Idx)]
	var s float64
	i, j := 0, 0
	for i < len(ai) && j < len(bi) {
		d := int64(ai[i]) - int64(bi[j])
		if d == 0 {
			s += av[i] * bv[j]
		}
		i += int(uint64(d-1) >> 63)  // d ≤ 0
		j += int(uint64(-d-1) >> 63) // d ≥ 0
	}
	return s
}

// DotDense returns <a, x> for a dense x (a's indices must be < len(x)),
// summed in a's index order.
func DotDense(a Row, x []float64) float64 {
	var s float64
	for k, i := range a.Idx {
		s += a.Val[k] * x[i]
	}
	return s
}

// Dist2 returns ‖a − b‖² = max(sa + sb − 2·dot, 0) for sa = ‖a‖²,
// sb = ‖b‖² and dot = <a, b>.
func Dist2(sa, sb, dot float64) float64 {
	return max(sa+sb-2*dot, 0)
}

// Check reports why r is not a valid row of dimension dim (indices
// strictly increasing in [0, dim), values finite and nonzero), nil if it
// is.
func Check(r Row, dim int) error {
	if len(r.Idx) != len(r.Val) {
		return fmt.Errorf("%d indices, %d values", len(r.Idx), len(r.Val))
	}
	prev := int32(-1)
	for k, i := range r.Idx {
		if i <= prev || int(i) >= dim {
			return fmt.Errorf("index %d after %d (dimension %d)", i, prev, dim)
		}
		if v := r.Val[k]; v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("value %v at index %d", v, i)
		}
		prev = i
	}
	return nil
}

// FromDense returns the row of x's nonzero entries in b's buffers.
func (b *Builder) FromDense(x []float64) Row {
	idx, val := b.idx[:0], b.val[:0]
	for i, v := range x {
		if v != 0 {
			idx = append(idx, int32(i))
			val = append(val, v)
		}
	}
	b.idx, b.val = idx, val
	return Row{Idx: idx, Val: val}
}

// Builder makes Rows from events. The zero value is ready to use; it
// grows its buffers to the largest event seen and then allocates nothing.
type Builder struct {
	e   []entry
	idx []int32
	val []float64
}

type entry struct {
	i   int32
	pos int32
	v   float64
}

// Build returns the row of the dense x with x[idx[k]] += val[k], k in
// order: the duplicates of an index summed in their order in idx (as the
// dense additions would), the indices sorted, the entries whose sum is
// exactly 0 left out. The row aliases b's buffers until the next Build.
// It panics if len(idx) != len(val).
func (b *Builder) Build(idx []int32, val []float64) Row {
	if len(idx) != len(val) {
		panic("sparse: Build: len(idx) != len(val)")
	}
	n := len(idx)
	if n == 0 {
		return Row{Idx: b.idx[:0], Val: b.val[:0]}
	}
	sorted := true
	for k := 1; k < n; k++ {
		if idx[k] <= idx[k-1] {
			sorted = false
			break
		}
	}
	out, vs := b.idx[:0], b.val[:0]
	if sorted { // the common case of an already canonical input
		for k, i := range idx {
			if v := val[k]; v != 0 {
				out = append(out, i)
				vs = append(vs, v)
			}
		}
		b.idx, b.val = out, vs
		return Row{Idx: out, Val: vs}
	}
	e := b.e[:0]
	for k, i := range idx {
		e = append(e, entry{i: i, pos: int32(k), v: val[k]})
	}
	b.e = e
	if n <= 48 { // insertion sort: stable, so duplicates stay in idx order
		for k := 1; k < n; k++ {
			t := e[k]
			j := k
			for ; j > 0 && e[j-1].i > t.i; j-- {
				e[j] = e[j-1]
			}
			e[j] = t
		}
	} else {
		slices.SortFunc(e, func(a, b entry) int {
			if c := cmp.Compare(a.i, b.i); c != 0 {
				return c
			}
			return cmp.Compare(a.pos, b.pos)
		})
	}
	for k := 0; k < n; {
		i, s := e[k].i, e[k].v
		for k++; k < n && e[k].i == i; k++ {
			s += e[k].v
		}
		if s != 0 {
			out = append(out, i)
			vs = append(vs, s)
		}
	}
	b.idx, b.val = out, vs
	return Row{Idx: out, Val: vs}
}

// Clone returns a copy of rows in one pair of fresh arrays.
func Clone(rows []Row) []Row {
	n := 0
	for _, r := range rows {
		n += len(r.Idx)
	}
	idx, val := make([]int32, n), make([]float64, n)
	out := make([]Row, len(rows))
	o := 0
	for k, r := range rows {
		m := len(r.Idx)
		copy(idx[o:o+m], r.Idx)
		copy(val[o:o+m], r.Val)
		out[k] = Row{Idx: idx[o : o+m : o+m], Val: val[o : o+m : o+m]}
		o += m
	}
	return out
}
