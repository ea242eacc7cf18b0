package proto

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/fxamacker/cbor/v2"
)

// Decoding limits. Every length a peer sends is bounded by these before
// anything is allocated for it.
const (
	// MaxNestedLevels bounds CBOR nesting, including inside Request params.
	MaxNestedLevels = 16
	// MaxArrayElements bounds any CBOR array (roster members, history pages).
	MaxArrayElements = 4096
	// MaxMapPairs bounds any CBOR map (Request params objects).
	MaxMapPairs = 1024
)

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
	// anyDecMode decodes JSON-like values (Request params, Response result).
	anyDecMode cbor.DecMode
)

func init() {
	var err error
	eo := cbor.CoreDetEncOptions() // RFC 8949 §4.2.1: bytewise key order, shortest forms
	eo.Time = cbor.TimeUnix        // unused on the wire; time is integer ms
	if encMode, err = eo.EncMode(); err != nil {
		panic(err)
	}
	do := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   MaxNestedLevels,
		MaxArrayElements:  MaxArrayElements,
		MaxMapPairs:       MaxMapPairs,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		UTF8:              cbor.UTF8RejectInvalid,
		BigIntDec:         cbor.BigIntDecodePointer,
	}
	if decMode, err = do.DecMode(); err != nil {
		panic(err)
	}
	do.DefaultMapType = reflect.TypeOf(map[string]any(nil))
	do.IntDec = cbor.IntDecConvertNone
	do.NaN = cbor.NaNDecodeForbidden // JSON has no NaN or infinities
	do.Inf = cbor.InfDecodeForbidden
	if anyDecMode, err = do.DecMode(); err != nil {
		panic(err)
	}
}

// ErrMalformed is wrapped by every decoding failure: bytes that are not
// well-formed CBOR, break a limit, or do not fit the expected structure.
var ErrMalformed = errors.New("malformed cbor")

// ErrNonCanonical is wrapped when well-formed input is not in the one
// canonical encoding (unsorted keys, non-minimal integers and so on).
var ErrNonCanonical = errors.New("non-canonical cbor")

// Marshal encodes v in RFC 8949 Core Deterministic form.
func Marshal(v any) ([]byte, error) { return encMode.Marshal(v) }

// Unmarshal decodes data strictly into v: no duplicate keys, no indefinite
// lengths, no tags, no unknown fields, and the limits above. It does not
// check canonical form; see [UnmarshalCanonical].
func Unmarshal(data []byte, v any) error {
	if err := decMode.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// UnmarshalCanonical is [Unmarshal] followed by a check that re-encoding v
// gives back exactly data. It rejects every alternative encoding of the
// same value, so each value has one byte form and signatures are not
// malleable.
func UnmarshalCanonical(data []byte, v any) error {
	if err := Unmarshal(data, v); err != nil {
		return err
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: re-encode: %v", ErrMalformed, err)
	}
	if !bytes.Equal(again, data) {
		return ErrNonCanonical
	}
	return nil
}

// CheckJSONValue checks that raw is one canonical CBOR data item of the
// JSON data model: maps with text keys, arrays, text, integers, floats,
// booleans and null. Request params and Response results must pass it, so
// they can be shown as JSON and have one byte form.
func CheckJSONValue(raw []byte) error {
	var v any
	if err := anyDecMode.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := checkJSONish(v, 0); err != nil {
		return err
	}
	again, err := encMode.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: re-encode: %v", ErrMalformed, err)
	}
	if !bytes.Equal(again, raw) {
		return ErrNonCanonical
	}
	return nil
}

func checkJSONish(v any, depth int) error {
	if depth > MaxNestedLevels {
		return fmt.Errorf("%w: nested too deeply", ErrMalformed)
	}
	switch t := v.(type) {
	case nil, bool, string, uint64, int64, float64:
		return nil
	case []any:
		for _, e := range t {
			if err := checkJSONish(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		for _, e := range t {
			if err := checkJSONish(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	default:
		return fmt.Errorf("%w: %T is not a JSON value", ErrMalformed, v)
	}
}
