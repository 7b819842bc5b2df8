package wire
import "testing"
func TestFeatureMatchesDecoder(t *testing.T) {
	h := HashConfig{Bits: 18, Seed: 3, Namespaces: []string{"p"}}
	d, _ := NewDecoder(1<<18, nil, 0)
	d, _ = d.WithHashing(h)
	var ev Event
	if err := d.Decode([]byte(`{"features":{"p":{"r17":2.5}}}`), &ev); err != nil { t.Fatal(err) }
	i, neg := h.Feature("p", "r17")
	if ev.Idx[0] != i || (ev.Val[0] < 0) != neg { t.Fatal(ev.Idx, ev.Val, i, neg) }
}
