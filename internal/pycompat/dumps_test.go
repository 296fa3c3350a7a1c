package pycompat

import "fmt"

// What Python writes: json.dumps('a"é😀\x7f\x01'), json.dumps('a"é😀\x01',
// ensure_ascii=False), the repr of floats, and json.dumps(json.loads(...)).
func ExampleQuote() {
	fmt.Println(Quote("a\"é😀\x7f\x01", true))
	fmt.Println(Quote("a\"é😀\x01", false))
	fmt.Println(FloatRepr(1), FloatRepr(1234567.5), FloatRepr(1e16), FloatRepr(0.0001), FloatRepr(0.00001))
	out, _ := Dumps([]byte(`{"b":[1,"é"],"a":{}}`))
	fmt.Println(out)
	// Output:
	// "a\"\u00e9\ud83d\ude00\u007f\u0001"
	// "a\"é😀\u0001"
	// 1.0 1234567.5 1e+16 0.0001 1e-05
	// {"b": [1, "\u00e9"], "a": {}}
}
