package codegen_test

import "testing"

// bitsModel exercises TDL's bit functions on values of every sign and
// magnitude (spread from the small random inputs by the index) and on
// shift counts from -3 to the width and beyond, in a signed and an
// unsigned dtype of each width class, and bit casts of computed floats.
const bitsModel = `
op spread(x: int[N]) -> [N] = lambda i: like(x, i * 1234567 - 20000000) * like(x, 977) + x[i]

op shifts(x: int[N]) -> [N, 70] = lambda i, j: shl(x[i], like(x, j - 3)) + shr(x[i], like(x, j - 3))

op mixed(x: int[N], y: int[N]) -> [N] = lambda i: bitxor(bitand(x[i], bitnot(y[i])), bitor(x[i], shr(y[i], 3)))

op casts(e: f32[N], h: f16[N]) -> [N] =
    lambda i: bitcast(bitcast(e[i] * 3.0, i32) + 1, f32) + f32(bitcast(bitcast(h[i], i16) + 1, f16)) + f32(bitcast(e[i], u32) % 1000)

model bits(a: i16[16], b: u8[16], c: i64[16], d: u64[16], e: f32[16], h: f16[16]) {
    sa = spread(a)
    sb = spread(b)
    sc = spread(c)
    sd = spread(d)
    return shifts(sa), shifts(sb), shifts(sc), shifts(sd), mixed(sa, sb), mixed(sb, sd), mixed(sc, sd), mixed(sd, sa), casts(e, h)
}
`

// TestBitFunctions compiles bitsModel and runs it on the cpu runtime and
// the emulator against the interpreter: the results must be equal.
func TestBitFunctions(t *testing.T) {
	compileMatching(t, tools(t), "bits", bitsModel, 1)
}
