package proto

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"

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
	// MaxJSONNestedLevels bounds the nesting of a JSON-model value
	// (Request params, Response result). Such a value sits inside two
	// maps of an envelope body (the body and its payload), and the whole
	// body must stay within MaxNestedLevels.
	MaxJSONNestedLevels = MaxNestedLevels - 2
)

var (
	encMode cbor.UserBufferEncMode
	decMode cbor.DecMode
	// anyDecMode decodes JSON-like values (Request params, Response result).
	anyDecMode cbor.DecMode
)

func init() {
	var err error
	eo := cbor.CoreDetEncOptions() // RFC 8949 §4.2.1: bytewise key order, shortest forms
	eo.Time = cbor.TimeUnix        // unused on the wire; time is integer ms
	// A nil slice encodes as an empty array or byte string, never as null,
	// so "empty" has one encoding and the re-encode check rejects null
	// where an array or byte string belongs.
	eo.NilContainers = cbor.NilContainerAsEmpty
	if encMode, err = eo.UserBufferEncMode(); err != nil {
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
		return fmt.Errorf("%w: %w", ErrMalformed, err)
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
	return checkReencode(data, v)
}

// encBufPool holds buffers for re-encoding checks, so that checking a
// canonical encoding does not allocate a copy of it.
var encBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledBuf keeps buffers that grew on a rare large input (a history
// response) out of the pool.
const maxPooledBuf = 64 << 10

// checkReencode re-encodes v and reports ErrNonCanonical unless that gives
// back exactly data.
func checkReencode(data []byte, v any) error {
	buf := encBufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooledBuf {
			encBufPool.Put(buf)
		}
	}()
	if err := encMode.MarshalToBuffer(v, buf); err != nil {
		return fmt.Errorf("%w: re-encode: %v", ErrMalformed, err)
	}
	if !bytes.Equal(buf.Bytes(), data) {
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
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := checkJSONish(v, 0); err != nil {
		return err
	}
	return checkReencode(raw, v)
}

// checkJSONish checks that v, found inside depth arrays and maps, is a
// JSON value whose containers nest at most MaxJSONNestedLevels deep.
func checkJSONish(v any, depth int) error {
	switch t := v.(type) {
	case nil, bool, string, uint64, int64, float64:
		return nil
	case []any:
		if depth >= MaxJSONNestedLevels {
			return errJSONTooDeep
		}
		for _, e := range t {
			if err := checkJSONish(e, depth+1); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if depth >= MaxJSONNestedLevels {
			return errJSONTooDeep
		}
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

var errJSONTooDeep = fmt.Errorf("%w: json value nested more than %d levels", ErrMalformed, MaxJSONNestedLevels)
