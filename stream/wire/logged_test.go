package wire

import (
	"strings"
	"testing"
)

// TestDecodeLogged: a Decoder WithLogged reads a request's logged
// decision, refuses a malformed one with a detail naming it, and the
// decoders without it skip the member (additive contract) or, strict,
// refuse it as unknown.
func TestDecodeLogged(t *testing.T) {
	d := requestDecoder(t, 3).WithLogged()
	var ev Event
	in := `{"id":"r","key":"u","candidates":[{"item":"x","features":[1,2]},{"item":"y","features":[3,4]}],"logged":{"propensity":0.25,"item":"y"}}`
	if err := d.Decode([]byte(in), &ev); err != nil {
		t.Fatal(err)
	}
	if !ev.HasLogged || string(ev.Logged) != "y" || ev.LoggedProp != 0.25 || ev.LoggedIndex() != 1 {
		t.Fatalf("logged %q %v %v, index %d", ev.Logged, ev.LoggedProp, ev.HasLogged, ev.LoggedIndex())
	}
	if err := d.Decode([]byte(`{"id":"r","key":"u","candidates":[{"item":"x","features":[1,2]}]}`), &ev); err != nil || ev.HasLogged || ev.LoggedIndex() != -1 {
		t.Fatalf("a request without logged: %v, HasLogged %v", err, ev.HasLogged)
	}
	cands := `"candidates":[{"item":"x","features":[1,2]}]`
	for _, c := range []struct{ in, detail string }{
		{`{"id":"r",` + cands + `,"logged":{"item":"z","propensity":0.5}}`, `logged.item "z" is not one of the candidates`},
		{`{"id":"r",` + cands + `,"logged":{"item":"x","propensity":0}}`, "logged.propensity: 0 is not in (0, 1]"},
		{`{"id":"r",` + cands + `,"logged":{"item":"x","propensity":1.5}}`, "logged.propensity: 1.5 is not in (0, 1]"},
		{`{"id":"r",` + cands + `,"logged":{"item":"x","propensity":"a"}}`, "logged.propensity: got string, want number"},
		{`{"id":"r",` + cands + `,"logged":{"item":"x"}}`, "logged: want item and propensity"},
		{`{"id":"r",` + cands + `,"logged":{"item":"x","propensity":0.5,"p":1}}`, `unknown field "logged.p"`},
		{`{"id":"r",` + cands + `,"logged":[1]}`, "logged: got array, want object"},
		{`{"id":"r","features":[1,2],"logged":{"item":"x","propensity":0.5}}`, "logged without candidates"},
	} {
		err := d.Decode([]byte(c.in), &ev)
		if err == nil || !strings.Contains(err.Error(), c.detail) {
			t.Errorf("%s: %v, want %q", c.in, err, c.detail)
		}
	}
	// The live service's decoders.
	if err := requestDecoder(t, 3).Decode([]byte(in), &ev); err != nil || ev.HasLogged {
		t.Errorf("without WithLogged: %v, HasLogged %v (want skipped)", err, ev.HasLogged)
	}
	if err := requestDecoder(t, 3).WithStrict().Decode([]byte(in), &ev); err == nil || !strings.Contains(err.Error(), `unknown field "logged"`) {
		t.Errorf("strict: %v, want unknown field", err)
	}
}
