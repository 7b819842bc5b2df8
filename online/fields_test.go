package online

import (
	"slices"
	"testing"
)

// fieldSpy is a FieldModel that records the fields it is given.
type fieldSpy struct {
	*Logistic
	field    []uint8
	labelled bool
}

func (m *fieldSpy) ObserveFields(idx []int32, val []float64, field []uint8, y float64, labelled bool) Prediction {
	m.field, m.labelled = slices.Clone(field), labelled
	return m.Logistic.ObserveSparse(idx, val, y, labelled)
}

// TestObserveFields: ObserveFields and PeekFields give a FieldModel the
// fields (PeekFields unlabelled), and give any other SparseModel
// ObserveSparse, the same prediction and learning as calling it directly.
func TestObserveFields(t *testing.T) {
	idx, val, field := []int32{3, 7, 3}, []float64{1, -0.5, 2}, []uint8{1, 2, 0}
	lg, _ := NewLogistic(16, LogisticParams{LearningRate: DefaultLearningRate})
	spy := &fieldSpy{Logistic: lg}
	ObserveFields(spy, idx, val, field, 1, true)
	if !slices.Equal(spy.field, field) || !spy.labelled || spy.Examples() != 1 {
		t.Fatalf("ObserveFields: fields %v labelled %v examples %d", spy.field, spy.labelled, spy.Examples())
	}
	p := PeekFields(spy, idx, val, []uint8{2, 2, 2})
	if !slices.Equal(spy.field, []uint8{2, 2, 2}) || spy.labelled || spy.Examples() != 1 {
		t.Fatalf("PeekFields: fields %v labelled %v examples %d", spy.field, spy.labelled, spy.Examples())
	}
	// A SparseModel that reads no fields: ObserveSparse.
	a, _ := NewLogistic(16, LogisticParams{LearningRate: DefaultLearningRate})
	b, _ := NewLogistic(16, LogisticParams{LearningRate: DefaultLearningRate})
	if pa, pb := ObserveFields(a, idx, val, field, 1, true), b.ObserveSparse(idx, val, 1, true); pa != pb {
		t.Fatalf("ObserveFields %+v, ObserveSparse %+v", pa, pb)
	}
	if pa, pb := PeekFields(a, idx, val, nil), PeekSparse(b, idx, val); pa != pb || pa != p || a.Examples() != 1 {
		t.Fatalf("PeekFields %+v, PeekSparse %+v, the spy's %+v", pa, pb, p)
	}
}
