package online

import (
	"bytes"
	"errors"
	"testing"
)

// TestWindowRelearnedOnRestore: a window whose sums are those of its
// examples mapped with slightly different frequencies (as in encodings
// written before the frequencies were stored in float32) restores, learned
// again from the stored inputs with the current map: the state of
// relearnWindow, which then encodes and restores to itself and keeps doing
// so as the window moves on. Sums further from the window's examples than
// the frequencies' rounding allows are refused. Fixed gamma and gamma auto.
func TestWindowRelearnedOnRestore(t *testing.T) {
	const d = 3
	fixed := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.2, Features: 24, Seed: 3}, Balance: true, Delta: 0.05, Window: Window{Events: 40}}
	auto := fixed
	auto.Kernel.Gamma = 0
	for _, c := range []struct {
		name string
		p    MAMParams
	}{{"fixed", fixed}, {"auto", auto}} {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMAM(d, c.p)
			if err != nil {
				t.Fatal(err)
			}
			ev := autoStream(9, 400, d)
			feed(m, ev[:200])
			clean := mustMarshal(t, m)

			// The sums of bank (or model) k, and the room the check allows
			// them: Σ_i min(2, s·2⁻²⁴·argBound(x_i)) over the window.
			target, ring, s := m, m.ring, 1.0
			if m.auto != nil {
				target, ring, s = m.auto.banks[2], m.auto.ring, m.auto.mult[2]
			}
			var room float64
			for i := range int(target.n) {
				room += min(2, s*0x1p-24*m.fm.argBound(ring[i*d:(i+1)*d]))
			}
			if !(room > 1e-6) {
				t.Fatalf("room %v: the test's inputs are too small to tell", room)
			}
			shifted := func(by float64) []byte {
				saved := append([]float64(nil), target.pos...)
				defer copy(target.pos, saved)
				target.pos[0] += by
				return mustMarshal(t, m)
			}

			// Within the room: restored, relearned.
			got := new(MAM)
			if err := got.UnmarshalBinary(shifted(0.5 * room)); err != nil {
				t.Fatalf("sums within the map's rounding: %v", err)
			}
			want := new(MAM)
			if err := want.UnmarshalBinary(clean); err != nil {
				t.Fatal(err)
			}
			if want.auto != nil {
				want.auto.relearnWindow(want)
				for _, bk := range want.auto.banks {
					bk.refresh()
				}
				want.auto.mix()
			} else {
				want.relearnWindow()
				want.refresh()
			}
			enc := mustMarshal(t, got)
			if !bytes.Equal(enc, mustMarshal(t, want)) {
				t.Fatal("the restored state is not the window learned again")
			}
			if bytes.Equal(enc, clean) {
				t.Fatal("the window was not learned again (the encoding is unchanged)")
			}
			again := new(MAM)
			if err := again.UnmarshalBinary(enc); err != nil || !bytes.Equal(mustMarshal(t, again), enc) {
				t.Fatalf("the relearned state does not restore to itself (%v)", err)
			}
			// The window moves on: its sums stay those of its examples.
			feed(got, ev[200:])
			enc = mustMarshal(t, got)
			if err := again.UnmarshalBinary(enc); err != nil || !bytes.Equal(mustMarshal(t, again), enc) {
				t.Fatalf("after the window turned over: %v", err)
			}

			// Beyond the room: refused.
			if err := new(MAM).UnmarshalBinary(shifted(2*room + 1e-6)); !errors.Is(err, ErrFormat) {
				t.Fatalf("sums beyond the map's rounding: %v, want ErrFormat", err)
			}
			// A clean encoding restores as it was.
			if err := again.UnmarshalBinary(clean); err != nil || !bytes.Equal(mustMarshal(t, again), clean) {
				t.Fatalf("clean encoding: %v", err)
			}
		})
	}
}
