package proto

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/fxamacker/cbor/v2"
)

// JSONToCBOR converts one JSON value into canonical CBOR, the form Request
// params and Response results travel in. Integers that fit int64 or uint64
// become CBOR integers; every other number becomes a float.
func JSONToCBOR(js []byte) (cbor.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("invalid json: data after the value")
	}
	v, err := fromJSONNumbers(v, 0)
	if err != nil {
		return nil, err
	}
	b, err := encMode.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode json value: %w", err)
	}
	return b, nil
}

// fromJSONNumbers replaces json.Numbers in v, found inside depth arrays
// and objects, with int64, uint64 or float64, and enforces the limits of
// [CheckJSONValue].
func fromJSONNumbers(v any, depth int) (any, error) {
	switch v.(type) {
	case []any, map[string]any:
		if depth >= MaxJSONNestedLevels {
			return nil, fmt.Errorf("invalid json: nested more than %d levels", MaxJSONNestedLevels)
		}
	}
	switch t := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return i, nil
		}
		if u, err := strconv.ParseUint(string(t), 10, 64); err == nil {
			return u, nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, fmt.Errorf("invalid json: number %s out of range", t)
		}
		return f, nil
	case []any:
		if len(t) > MaxArrayElements {
			return nil, fmt.Errorf("invalid json: array of %d elements exceeds %d", len(t), MaxArrayElements)
		}
		for i := range t {
			e, err := fromJSONNumbers(t[i], depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = e
		}
		return t, nil
	case map[string]any:
		if len(t) > MaxMapPairs {
			return nil, fmt.Errorf("invalid json: object of %d members exceeds %d", len(t), MaxMapPairs)
		}
		for k, e := range t {
			e2, err := fromJSONNumbers(e, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = e2
		}
		return t, nil
	default:
		return v, nil
	}
}

// CBORToJSON renders a JSON-model CBOR value (see [CheckJSONValue]) as
// JSON. An empty input renders as null.
func CBORToJSON(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return []byte("null"), nil
	}
	var v any
	if err := anyDecMode.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if err := checkJSONish(v, 0); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
