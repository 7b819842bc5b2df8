package config

import (
	"strings"
	"testing"

	"github.com/streamer/streamer/online"
)

// TestKernelOrthogonal: kernel.orthogonal parses for the random features
// of rbf and laplacian, changes the model's fingerprint (a state saved
// without it is not restored into a config with it), and elsewhere is an
// error naming the key and its line.
func TestKernelOrthogonal(t *testing.T) {
	doc := func(kernel string, extra string) []byte {
		return []byte("models:\n  - name: m\n    type: mam\n    features: {dim: 2}\n" + extra + "    kernel:\n" + kernel)
	}
	parse := func(b []byte) (Config, error) { return Parse(b, nil, testTypes) }

	with, err := parse(doc("      type: rbf\n      orthogonal: true\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	without, err := parse(doc("      type: rbf\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	if p := with.Models[0].Params.(*online.MAMParams); !p.Kernel.Orthogonal || p.Kernel.Features != online.DefaultRFFFeatures {
		t.Errorf("parsed kernel %+v", p.Kernel)
	}
	if without.Models[0].Params.(*online.MAMParams).Kernel.Orthogonal {
		t.Error("orthogonal defaults to true")
	}
	if with.Models[0].Fingerprint() == without.Models[0].Fingerprint() {
		t.Error("kernel.orthogonal does not change the fingerprint")
	}
	explicit, err := parse(doc("      type: rbf\n      orthogonal: false\n", ""))
	if err != nil || explicit.Models[0].Fingerprint() != without.Models[0].Fingerprint() {
		t.Errorf("orthogonal: false changes the fingerprint (%v)", err)
	}
	if _, err := parse(doc("      type: laplacian\n      gamma: 2\n      orthogonal: true\n", "")); err != nil {
		t.Errorf("laplacian: %v", err)
	}

	for _, c := range []struct{ kernel, extra, want string }{
		{"      type: linear\n      orthogonal: true\n", "",
			"config: models[0].kernel.orthogonal: not used by the linear kernel: must be false (line 7)"},
		{"      type: rbf\n      gamma: 1\n      orthogonal: true\n", "    budget: 10\n",
			"config: models[0].kernel.orthogonal: not used in the exact kernel mode (budget > 0): remove it (line 9)"},
	} {
		_, err := parse(doc(c.kernel, c.extra))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
