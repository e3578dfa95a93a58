package native

import (
	"math"
	"testing"

	"tofuc/lang"
	"tofuc/runtime/tensor"
)

// TestEncodeDecode: every dtype round-trips through its native layout,
// values rounded or wrapped to the dtype as the interpreter holds them,
// and a destination of the wrong size is an error.
func TestEncodeDecode(t *testing.T) {
	for dt := lang.F32; dt <= lang.Bool; dt++ {
		src := tensor.New(dt, []int{3, 5})
		for i := range src.Len() {
			if dt.IsFloat() {
				src.SetFlat(i, dt.RoundFloat(float64(i)*0.37-2))
			} else {
				src.SetFlat(i, float64(dt.WrapInt(int64(i*37-100))))
			}
		}
		buf := make([]byte, src.Len()*dt.Size())
		if err := Encode(src, buf); err != nil {
			t.Fatal(dt, err)
		}
		got, err := Decode(dt, src.Shape, buf)
		if err != nil {
			t.Fatal(dt, err)
		}
		for i := range src.Len() {
			if a, b := got.Flat(i), src.Flat(i); a != b && !(math.IsNaN(a) && math.IsNaN(b)) {
				t.Errorf("%s element %d: %v after the round trip, want %v", dt, i, a, b)
			}
		}
		if err := Encode(src, buf[1:]); err == nil {
			t.Errorf("%s: encoding into a short buffer succeeded", dt)
		}
		if _, err := Decode(dt, src.Shape, buf[1:]); err == nil {
			t.Errorf("%s: decoding a short buffer succeeded", dt)
		}
	}
}
