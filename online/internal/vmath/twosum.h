// TWOSUM(s, v, t, b, e): Knuth's TwoSum of s + v for the kernels'
// compensated sums, on four (Y) or eight (Z) lanes: t = fl(s + v), b = t − s,
// e = (s − (t − b)) + (v − b), the exact error of t, in the Go code's order;
// b is clobbered, s and v are kept.
#define TWOSUM(s, v, t, b, e) \
	VADDPD v, s, t \
	VSUBPD s, t, b \
	VSUBPD b, t, e \
	VSUBPD e, s, e \
	VSUBPD b, v, b \
	VADDPD b, e, e
