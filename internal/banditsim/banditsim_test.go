package banditsim

import (
	"math"
	"testing"
)

// TestWorld: the same seed draws the same world, and a click probability
// is σ of the user's and item's inner product.
func TestWorld(t *testing.T) {
	a, b := New(3, 4, 2, 9), New(3, 4, 2, 9)
	if len(a.Users) != 3 || len(a.Items) != 4 || len(a.Users[0]) != 2 {
		t.Fatalf("world of %d users, %d items", len(a.Users), len(a.Items))
	}
	for u := range a.Users {
		for v := range a.Items {
			if a.ClickProb(u, v) != b.ClickProb(u, v) {
				t.Fatalf("seed 9 drew two worlds")
			}
		}
	}
	s := a.Users[1][0]*a.Items[2][0] + a.Users[1][1]*a.Items[2][1]
	if got, want := a.ClickProb(1, 2), 1/(1+math.Exp(-s)); math.Abs(got-want) > 1e-15 {
		t.Errorf("ClickProb(1, 2) = %v, want %v", got, want)
	}
}
