package online

import (
	"math"
	"testing"
)

func TestMistakeBound(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	tests := []struct {
		name                   string
		B, M, R, n, delta, rho float64
		want                   float64
	}{
		// ln(2/0.05) = ln 40 = 3.6888794541139363
		// sqrt(2·3.6888794541139363/10⁴) = 0.02716203031481239, ×3 = 0.08148609094443717
		// numerator 1 − 0.5 + 0.1 + 0.08148609094443717 = 0.6814860909444371
		// /(1 + 0.5) = 0.45432406062962477
		{"unit B", 1, 0.5, 0.1, 1e4, 0.05, 0.5, 0.45432406062962477},
		// ln(2/0.1) = ln 20 = 2.995732273553991
		// sqrt(2·2.995732273553991/10⁴) = 0.024477468306808164, ×3B = ×6 = 0.14686480984084898
		// numerator 2 − 1.5 + 0.05 + 0.14686480984084898 = 0.696864809840849
		// /(2 + 1) = 0.23228826994694965
		{"B=2", 2, 1.5, 0.05, 1e4, 0.1, 1, 0.23228826994694965},
		// sqrt(2·3.6888794541139363/10⁶) = 0.002716203031481239, ×3 = 0.008148609094443717
		// numerator 1 − 0.9 + 0.02 + 0.008148609094443717 = 0.1281486090944437, /(1 + 0) the same
		{"rho 0", 1, 0.9, 0.02, 1e6, 0.05, 0, 0.1281486090944437},
		// as "unit B" but /(1 − 0.5): 1.3629721818888743 > 1, clipped
		{"clip above, negative rho", 1, 0.5, 0.1, 1e4, 0.05, -0.5, 1},
		// numerator 1 − 1.2 + 0 + 0.08148609094443717 < 0, clipped
		{"clip below", 1, 1.2, 0, 1e4, 0.05, 0.5, 0},
		// sqrt(2·3.6888794541139363/10) = 0.8589, ×3 > 1 alone
		{"small n vacuous", 1, 0.5, 0.1, 10, 0.05, 0.9, 1},
		{"n=0", 1, 0, 0, 0, 0.05, 0.5, 1},
		{"n<0", 1, 0, 0, -1, 0.05, 0.5, 1},
		{"rho=-B", 1, 0.5, 0.1, 1e4, 0.05, -1, 1},
		{"rho<-B", 1, 0.5, 0.1, 1e4, 0.05, -2, 1},
		{"B=0", 0, 0, 0, 1e4, 0.05, 0.5, 1},
		{"delta 0", 1, 0.5, 0.1, 1e4, 0, 0.5, 1},
		{"delta 1", 1, 0.5, 0.1, 1e4, 1, 0.5, 1},
		{"NaN margin", 1, nan, 0.1, 1e4, 0.05, 0.5, 1},
		{"NaN rho", 1, 0.5, 0.1, 1e4, 0.05, nan, 1},
		{"Inf rho", 1, 0.5, 0.1, 1e4, 0.05, inf, 1},
		{"Inf n", 1, 0.5, 0.1, inf, 0.05, 0.5, 1},
		{"Inf R", 1, 0.5, inf, 1e4, 0.05, 0.5, 1},
		{"NaN delta", 1, 0.5, 0.1, 1e4, nan, 0.5, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := MistakeBound(tc.B, tc.M, tc.R, tc.n, tc.delta, tc.rho)
			if math.Abs(got-tc.want) > 1e-15 {
				t.Errorf("MistakeBound(%v, %v, %v, %v, %v, %v) = %.17g, want %.17g",
					tc.B, tc.M, tc.R, tc.n, tc.delta, tc.rho, got, tc.want)
			}
		})
	}
}

func TestMistakeBoundMonotoneInRho(t *testing.T) {
	prev := 2.0
	for rho := -0.99; rho <= 1; rho += 0.01 {
		b := MistakeBound(1, 0.6, 0.05, 1e5, 0.05, rho)
		if b > prev || b < 0 || b > 1 {
			t.Fatalf("bound(%v) = %v after %v", rho, b, prev)
		}
		prev = b
	}
}
