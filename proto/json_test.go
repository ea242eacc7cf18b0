package proto

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestJSONToCBOR(t *testing.T) {
	tests := []struct {
		js   string
		want []byte
		back string // CBORToJSON of want; "" means same as js
	}{
		{`0`, cUint(0), ""},
		{`23`, cUint(23), ""},
		{`24`, cHeadWidth(mtUint, 24, 1), ""},
		{`-1`, cInt(-1), ""},
		{`-24`, []byte{0x37}, ""},
		{`-25`, []byte{0x38, 0x18}, ""},
		{`1700000000000`, cInt(1700000000000), ""},
		{`9223372036854775807`, cHeadWidth(mtUint, 1<<63-1, 8), ""},
		{`9223372036854775808`, cHeadWidth(mtUint, 1<<63, 8), ""},
		{`18446744073709551615`, cHeadWidth(mtUint, 1<<64-1, 8), ""},
		{`-9223372036854775808`, cHeadWidth(mtNint, 1<<63-1, 8), ""},
		// Beyond uint64 / int64: a float.
		{`18446744073709551616`, cFloat32(1 << 64), `18446744073709552000`},
		{`-9223372036854775809`, cFloat32(-(1 << 63)), `-9223372036854776000`},
		// Floats take the shortest IEEE 754 form that keeps the value.
		{`1.5`, cFloat16(0x3e00), ""},
		{`0.5`, cFloat16(0x3800), ""},
		{`-0.0`, cFloat16(0x8000), `-0`},
		{`1.0`, cFloat16(0x3c00), `1`},
		{`1e2`, cFloat16(0x5640), `100`},
		{`100000.5`, cFloat32(100000.5), ""},
		{`0.1`, cFloat64(0.1), ""},
		{`1e300`, cFloat64(1e300), `1e+300`},
		{`5e-324`, cFloat64(5e-324), ""},
		{`true`, cTrue, ""},
		{`false`, cFalse, ""},
		{`null`, cNull, ""},
		{`""`, cText(""), ""},
		{`"héllo"`, cText("héllo"), ""},
		{`"\u003c\u0000"`, cText("<\x00"), `"\u003c\u0000"`},
		{`[]`, cArr(), ""},
		{`{}`, cMap(), ""},
		{`[1,[2,[3]]]`, cArr(cUint(1), cArr(cUint(2), cArr(cUint(3)))), ""},
		// Map keys in bytewise order of their encoding: shorter first.
		{`{"b":1,"aa":2,"a":3}`, cMap(cText("a"), cUint(3), cText("b"), cUint(1), cText("aa"), cUint(2)), `{"a":3,"aa":2,"b":1}`},
		{` {"x" : [ true , null ] } `, cMap(cText("x"), cArr(cTrue, cNull)), `{"x":[true,null]}`},
	}
	for _, tt := range tests {
		got, err := JSONToCBOR([]byte(tt.js))
		if err != nil {
			t.Errorf("JSONToCBOR(%s): %v", tt.js, err)
			continue
		}
		if !bytes.Equal(got, tt.want) {
			t.Errorf("JSONToCBOR(%s) = %x, want %x", tt.js, got, tt.want)
			continue
		}
		if err := CheckJSONValue(got); err != nil {
			t.Errorf("CheckJSONValue(JSONToCBOR(%s)): %v", tt.js, err)
		}
		back, err := CBORToJSON(got)
		want := tt.back
		if want == "" {
			want = tt.js
		}
		if err != nil || string(back) != want {
			t.Errorf("CBORToJSON(%x) = %s, %v; want %s", got, back, err, want)
		}
	}
}

func TestJSONToCBORRejects(t *testing.T) {
	for _, js := range []string{
		``, `   `, `{`, `[1,]`, `{"a":1,}`, `nul`, `'x'`, `NaN`, `Infinity`, `-`, `01`, `.5`,
		`1 2`, `{} {}`, `1 }`, `[] ]`, `"a" x`, `1e400`, `-1e400`,
		strings.Repeat("[", MaxJSONNestedLevels+1) + strings.Repeat("]", MaxJSONNestedLevels+1),
		`[` + strings.Repeat(`0,`, MaxArrayElements) + `0]`,
		manyMembersJSON(MaxMapPairs + 1),
	} {
		if b, err := JSONToCBOR([]byte(js)); err == nil {
			name := js
			if len(name) > 40 {
				name = name[:40] + "..."
			}
			t.Errorf("JSONToCBOR(%s) = %x, want an error", name, b)
		}
	}
	// The limits themselves are accepted, and what JSONToCBOR accepts
	// fits in a Request.
	for _, js := range []string{
		strings.Repeat("[", MaxJSONNestedLevels) + strings.Repeat("]", MaxJSONNestedLevels),
		strings.Repeat(`{"a":`, MaxJSONNestedLevels-1) + "[]" + strings.Repeat("}", MaxJSONNestedLevels-1),
		`[` + strings.Repeat(`0,`, MaxArrayElements-1) + `0]`,
		manyMembersJSON(MaxMapPairs),
	} {
		b, err := JSONToCBOR([]byte(js))
		if err != nil {
			t.Fatalf("JSONToCBOR at the limit: %v", err)
		}
		if err := CheckJSONValue(b); err != nil {
			t.Fatalf("CheckJSONValue at the limit: %v", err)
		}
		e := baseEnvelope(ToPeer(bob), KindRequest)
		e.Request = &Request{RequestID: reqID, Intent: "x", Params: b}
		se := mustSign(t, keyAlice, &e)
		if _, err := ParseEnvelope(se.Raw); err != nil {
			t.Fatalf("params at the limit do not parse in an envelope: %v", err)
		}
	}
}

func manyMembersJSON(n int) string {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range n {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`"k` + hex.EncodeToString([]byte{byte(i >> 8), byte(i)}) + `":0`)
	}
	sb.WriteString("}")
	return sb.String()
}

func TestCheckJSONValue(t *testing.T) {
	tests := []struct {
		name  string
		in    []byte
		wants []error
		is    func(error) bool
	}{
		{"uint", cUint(7), nil, nil},
		{"max uint64", cHeadWidth(mtUint, 1<<64-1, 8), nil, nil},
		{"min int64", cHeadWidth(mtNint, 1<<63-1, 8), nil, nil},
		{"float16", cFloat16(0x3e00), nil, nil},
		{"object", cMap(cText("a"), cArr(cTrue, cFalse, cNull, cText("x"))), nil, nil},
		{"nested at the limit", nested(MaxJSONNestedLevels - 1), nil, nil},

		{"empty", nil, []error{ErrMalformed}, nil},
		{"two items", cCat(cUint(1), cUint(2)), []error{ErrMalformed}, isExtra},
		{"truncated", cArr(cUint(1))[:1], []error{ErrMalformed}, nil},
		{"int beyond int64", cHeadWidth(mtNint, 1<<63, 8), []error{ErrMalformed}, nil},
		{"byte string", cBytes([]byte{1}), []error{ErrMalformed}, nil},
		{"integer map key", cMap(cUint(1), cUint(2)), []error{ErrMalformed}, nil},
		{"array map key", cMap(cArr(), cUint(2)), []error{ErrMalformed}, nil},
		{"NaN", cFloat16(0x7e00), []error{ErrMalformed}, nil},
		{"NaN float64", cFloat64(nan()), []error{ErrMalformed}, nil},
		{"-Inf", cFloat16(0xfc00), []error{ErrMalformed}, nil},
		{"simple value 0", []byte{0xe0}, []error{ErrMalformed}, nil},
		{"simple value 255", []byte{0xf8, 0xff}, []error{ErrMalformed}, nil},
		{"tag", cCat([]byte{0xc1}, cUint(0)), []error{ErrMalformed}, isTag},
		{"indefinite text", cCat([]byte{0x7f}, cText("a"), cBreak), []error{ErrMalformed}, isIndef},
		{"indefinite map", cCat([]byte{0xbf}, cText("a"), cUint(1), cBreak), []error{ErrMalformed}, isIndef},
		{"duplicate key", cMap(cText("a"), cUint(1), cText("a"), cUint(2)), []error{ErrMalformed}, isDup},
		{"invalid UTF-8", cText("\xc3"), []error{ErrMalformed}, nil},
		{"nested beyond MaxJSONNestedLevels", nested(MaxJSONNestedLevels), []error{ErrMalformed}, nil},
		{"nested beyond MaxNestedLevels", nested(MaxNestedLevels), []error{ErrMalformed}, isNested},
		{"array beyond MaxArrayElements", repeatItems(MaxArrayElements+1, cNull), []error{ErrMalformed}, isMaxArray},
		{"map beyond MaxMapPairs", manyPairs(MaxMapPairs + 1), []error{ErrMalformed}, isMaxMap},
		{"undefined", []byte{0xf7}, []error{ErrNonCanonical}, nil},
		{"float64 not shortest", cFloat64(1.5), []error{ErrNonCanonical}, nil},
		{"float32 not shortest", cFloat32(1.5), []error{ErrNonCanonical}, nil},
		{"float16 NaN payload", cFloat16(0x7e01), []error{ErrMalformed}, nil},
		{"uint non-minimal", cHeadWidth(mtUint, 0, 1), []error{ErrNonCanonical}, nil},
		{"nint non-minimal", cHeadWidth(mtNint, 0, 2), []error{ErrNonCanonical}, nil},
		{"text length non-minimal", cCat(cHeadWidth(mtText, 1, 1), []byte("a")), []error{ErrNonCanonical}, nil},
		{"map keys unsorted", cMap(cText("b"), cUint(1), cText("a"), cUint(1)), []error{ErrNonCanonical}, nil},
		{"map keys length-first violated", cMap(cText("aa"), cUint(1), cText("b"), cUint(1)), []error{ErrNonCanonical}, nil},
		{"nested map unsorted", cArr(cArr(cMap(cText("b"), cUint(1), cText("a"), cUint(1)))), []error{ErrNonCanonical}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckJSONValue(tt.in)
			if tt.wants == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := CBORToJSON(tt.in); err != nil {
					t.Fatalf("CBORToJSON: %v", err)
				}
				return
			}
			if err := checkSentinels(err, tt.wants...); err != nil {
				t.Fatal(err)
			}
			if tt.is != nil && !tt.is(err) {
				t.Fatalf("error %v lacks the expected cause", err)
			}
			// CBORToJSON is lenient about canonical form (it renders what
			// it can) but refuses everything outside the JSON model.
			if errors.Is(err, ErrMalformed) && len(tt.in) > 0 {
				if js, err := CBORToJSON(tt.in); err == nil {
					t.Fatalf("CBORToJSON rendered %s", js)
				}
			}
		})
	}
}

func TestCBORToJSON(t *testing.T) {
	for _, in := range [][]byte{nil, {}} {
		if js, err := CBORToJSON(in); err != nil || string(js) != "null" {
			t.Errorf("CBORToJSON(%x) = %s, %v", in, js, err)
		}
	}
	// Round trips JSON → CBOR → JSON → CBOR for values without floats:
	// the bytes come back identical.
	for _, js := range []string{
		`{"pkg":"./proto","race":true,"count":3,"tags":["a","b"],"neg":-7,"nil":null,"big":18446744073709551615}`,
		`[[],{},[[{"":""}]],-9223372036854775808]`,
		`"\u2028 <script> & \"quoted\" \\ \t"`,
	} {
		b1 := mustJSON(t, js)
		j1, err := CBORToJSON(b1)
		if err != nil {
			t.Fatal(err)
		}
		b2 := mustJSON(t, string(j1))
		if !bytes.Equal(b1, b2) {
			t.Errorf("round trip of %s: %x != %x", js, b1, b2)
		}
	}
}

func nan() float64 {
	var zero float64
	return zero / zero
}
