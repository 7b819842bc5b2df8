package sparse

// Index is an inverted index of a fixed list of rows: for every index
// (feature) that occurs, the rows holding it, in list order, with their
// values. Dots gives the dot products of an input with every row at the
// cost of the entries they share, instead of a merge per row. It is
// immutable once built, so it may be used concurrently.
type Index struct {
	n     int             // rows
	post  map[int32]int32 // feature → its posting list
	start []int32         // posting list p is rows[start[p]:start[p+1]]
	rows  []int32
	vals  []float64
}

// NewIndex builds the index of rows.
func NewIndex(rows []Row) *Index {
	ix := &Index{n: len(rows), post: map[int32]int32{}}
	total := 0
	for _, r := range rows {
		total += len(r.Idx)
	}
	// Each entry's list, looked up once (the map's accesses were most of
	// the build).
	var count []int32
	list := make([]int32, total)
	at := 0
	for _, r := range rows {
		for _, i := range r.Idx {
			p, ok := ix.post[i]
			if !ok {
				p = int32(len(count))
				ix.post[i] = p
				count = append(count, 0)
			}
			count[p]++
			list[at] = p
			at++
		}
	}
	ix.start = make([]int32, len(count)+1)
	for p, c := range count {
		ix.start[p+1] = ix.start[p] + c
	}
	ix.rows, ix.vals = make([]int32, total), make([]float64, total)
	fill := count // reused as the fill position of each list
	copy(fill, ix.start[:len(count)])
	at = 0
	for j, r := range rows {
		for k := range r.Idx {
			p := list[at]
			at++
			f := fill[p]
			ix.rows[f], ix.vals[f] = int32(j), r.Val[k]
			fill[p]++
		}
	}
	return ix
}

// Rows returns the number of rows indexed.
func (ix *Index) Rows() int { return ix.n }

// Dots sets dst[j] = <x, rows[j]> for every row j (len(dst) must be the
// number of rows): each sum over the common indices in increasing index
// order, bit for bit Dot(x, rows[j]) (x's indices must be increasing). It
// costs O(len(dst) + Σ over x's entries of the rows sharing them) and
// does not allocate.
func (ix *Index) Dots(dst []float64, x Row) {
	if len(dst) != ix.n {
		panic("sparse: Index.Dots: len(dst) is not the number of rows")
	}
	clear(dst)
	for k, i := range x.Idx {
		p, ok := ix.post[i]
		if !ok {
			continue
		}
		v := x.Val[k]
		a, b := ix.start[p], ix.start[p+1]
		rows, vals := ix.rows[a:b], ix.vals[a:b]
		for t, j := range rows {
			dst[j] += v * vals[t]
		}
	}
}
