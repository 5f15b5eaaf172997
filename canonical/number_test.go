package canonical

import (
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

func TestNumberSpellingNormalisesExactly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"integer", "1", "1"},
		{"trailing fraction zero", "1.0", "1"},
		{"zero exponent", "1e0", "1"},
		{"negative exponent", "10e-1", "1"},
		{"fraction with exponent", "0.1e1", "1"},
		{"capital E and plus sign", "1E+0", "1"},
		{"exponent leading zeros", "1e007", "10000000"},
		{"negative zero", "-0", "0"},
		{"negative zero fraction", "-0.000", "0"},
		{"zero with exponent", "0e99", "0"},
		{"zero with huge exponent", "-0.0e-99999999999999999999999", "0"},
		{"negative", "-12.50", "-12.5"},
		{"big integer keeps every digit", "12345678901234567890", "12345678901234567890"},
		{"neighbouring big integer stays distinct", "12345678901234567891", "12345678901234567891"},
		{"integer beyond float64 precision", "9007199254740993", "9007199254740993"},
		{"decimal beyond float64 precision", "333333333.33333329", "333333333.33333329"},
		{"long fraction kept", "0.1000000000000000055511151231257827", "0.1000000000000000055511151231257827"},
		{"twenty-one digit integer is plain", "123456789012345678901", "123456789012345678901"},
		{"1e20 is plain", "1e20", "100000000000000000000"},
		{"integer spelled with exponent", "123e18", "123000000000000000000"},
		{"1e21 takes an exponent", "1e21", "1e+21"},
		{"twenty-two digit integer takes an exponent", "1234567890123456789012", "1.234567890123456789012e+21"},
		{"trailing zeros move into the exponent", "1200000000000000000000000", "1.2e+24"},
		{"plain decimal", "12.5", "12.5"},
		{"exponent spelling of a decimal", "125e-1", "12.5"},
		{"small decimal", "0.000123", "0.000123"},
		{"1e-6 is plain", "1e-6", "0.000001"},
		{"below 1e-6 takes an exponent", "1e-7", "1e-7"},
		{"small with several digits", "0.00000015", "1.5e-7"},
		{"2e-3", "2e-3", "0.002"},
		{"4.50", "4.50", "4.5"},
		{"tiny", "0.000000000000000000000000001", "1e-27"},
		{"below float64 range", "1e-400", "1e-400"},
		{"above float64 range", "-2.5e400", "-2.5e+400"},
		{"exponent past int64", "1e99999999999999999999999", "1e+99999999999999999999999"},
		{"negative exponent past int64", "-1.23e-99999999999999999999999", "-1.23e-99999999999999999999999"},
		{"exponent past int64 with fraction shift", "0.0012e100000000000000000000", "1.2e+99999999999999999997"},
		{"eighteen digit exponent", "1e999999999999999999", "1e+999999999999999999"},
		{"eighteen digit exponent with shift", "123e999999999999999999", "1.23e+1000000000000000001"},
		{"exponent cancels digits", "123456e-3", "123.456"},
		{"digits across the point", "1234.5678e2", "123456.78"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(json.Number(tt.in))
			if err != nil {
				t.Fatalf("Marshal(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal(%s) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := Marshal(json.Number(got))
			if err != nil || string(again) != string(got) {
				t.Errorf("canonical %s re-canonicalises to %s, %v", got, again, err)
			}
			if exponentSmall(tt.in) && !sameRational(tt.in, string(got)) {
				t.Errorf("Marshal(%s) = %s, a different value", tt.in, got)
			}
		})
	}
}

// exponentSmall tells whether big.Rat can hold s's value cheaply.
func exponentSmall(s string) bool {
	i := strings.IndexAny(s, "eE")
	return i < 0 || len(s)-i < 6
}

func sameRational(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

func TestInvalidNumberSyntaxIsRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"lone minus", "-"},
		{"plus sign", "+1"},
		{"leading zero", "01"},
		{"leading zeros before point", "00.5"},
		{"point without fraction", "1."},
		{"point without integer", ".5"},
		{"exponent without digits", "1e"},
		{"exponent sign without digits", "1e+"},
		{"hex", "0x10"},
		{"space", " 1"},
		{"trailing space", "1 "},
		{"NaN", "NaN"},
		{"Infinity", "Infinity"},
		{"two points", "1.2.3"},
		{"minus after digits", "1-"},
		{"long garbage", strings.Repeat("9", 100) + "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Marshal(json.Number(tt.in))
			if !errors.Is(err, ErrInvalidNumber) {
				t.Errorf("Marshal(%q) error = %v, want ErrInvalidNumber", tt.in, err)
			}
		})
	}
}

func TestInvalidNumberErrorIsBounded(t *testing.T) {
	t.Parallel()
	_, err := Marshal(json.Number(strings.Repeat("1", 1<<16) + "x"))
	if !errors.Is(err, ErrInvalidNumber) || len(err.Error()) > 200 {
		t.Errorf("error = %.300v (%d bytes), want a short ErrInvalidNumber", err, len(err.Error()))
	}
}

// RFC 8785 appendix B: for float64 values the form is the one JCS gives.
func TestFloatsMatchRFC8785(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{"zero", 0, "0"},
		{"negative zero", math.Copysign(0, -1), "0"},
		{"smallest subnormal", 5e-324, "5e-324"},
		{"negative smallest subnormal", -5e-324, "-5e-324"},
		{"largest", 1.7976931348623157e308, "1.7976931348623157e+308"},
		{"negative largest", -1.7976931348623157e308, "-1.7976931348623157e+308"},
		{"2^53", 9007199254740992, "9007199254740992"},
		{"-2^53", -9007199254740992, "-9007199254740992"},
		{"largest plain", 295147905179352830000, "295147905179352830000"},
		{"1e21", 1e21, "1e+21"},
		{"1e-7", 1e-7, "1e-7"},
		{"1e-6", 0.000001, "0.000001"},
		{"shortest round trip", 333333333.33333329, "333333333.3333333"},
		{"4.5", 4.50, "4.5"},
		{"0.002", 2e-3, "0.002"},
		{"1e-27", 0.000000000000000000000000001, "1e-27"},
		{"integral float", 100, "100"},
		{"one tenth", 0.1, "0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal(%v): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal(%v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestFloat32UsesItsOwnShortestDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   float32
		want string
	}{
		{"one tenth", 0.1, "0.1"},
		{"2^24", 16777216, "16777216"},
		{"largest", math.MaxFloat32, "3.4028235e+38"},
		{"smallest subnormal", math.SmallestNonzeroFloat32, "1e-45"},
		{"negative zero", float32(math.Copysign(0, -1)), "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal(%v): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Marshal(%v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

// A number hashes the same whether a Go caller built it or it was decoded
// from text, so the caller's choice of type does not split idempotency.
func TestNumberTypesAgreeOnTheSameValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []any
	}{
		{"one", []any{1, int8(1), uint64(1), 1.0, float32(1), json.Number("1"), json.Number("1.0"), json.Number("10e-1")}},
		{"minus zero", []any{0, math.Copysign(0, -1), json.Number("-0"), json.Number("0.0e5")}},
		{"large", []any{int64(1e18), 1e18, json.Number("1e18"), json.Number("1000000000000000000")}},
		{"half", []any{0.5, float32(0.5), json.Number("5e-1"), json.Number("0.50")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want, err := Hash(tt.values[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range tt.values[1:] {
				if got, err := Hash(v); err != nil || got != want {
					t.Errorf("Hash(%T %v) = %s, %v; want %s", v, v, got, err, want)
				}
			}
		})
	}
}
