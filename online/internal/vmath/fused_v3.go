//go:build amd64.v3

package vmath

// goFusesMulAdd: built for GOAMD64=v3 or later, the compiler contracts a
// Go x*y + z into an FMA (rounding once), unless the product is converted
// to float64 first.
const goFusesMulAdd = true
