package v1alpha1

import (
	"math"
	"strings"
	"testing"
)

func TestOngoingTransactionsAnnouncementRoundTripsAndIsRemovedAtZero(t *testing.T) {
	for _, tc := range []struct {
		n    int32
		want string
	}{
		{1, "1"},
		{42, "42"},
		{MaxOngoingTransactionsPerBroker, "1000000"},
		{MaxOngoingTransactionsPerBroker + 1, "1000000"}, // capped: never what the operator refuses
		{math.MaxInt32, "1000000"},
		{0, ""}, // nothing to say: the annotation is removed
		{-3, ""},
	} {
		s := FormatOngoingTransactions(tc.n)
		if s != tc.want {
			t.Errorf("FormatOngoingTransactions(%d) = %q, want %q", tc.n, s, tc.want)
			continue
		}
		got, err := ReadOngoingTransactions(s)
		if wantN := min(max(tc.n, 0), MaxOngoingTransactionsPerBroker); err != nil || got != wantN {
			t.Errorf("ReadOngoingTransactions(%q) = %d, %v; want %d", s, got, err, wantN)
		}
	}
}

// What a broker says of its open transactions is a count the operator shows; it must read
// strictly, or not at all, and never as a number a status field cannot hold.
func TestAnOngoingTransactionsAnnouncementIsReadStrictlyOrNotAtAll(t *testing.T) {
	for _, tc := range []struct{ rule, value string }{
		{"a zero count", "0"},
		{"a negative count", "-1"},
		{"a plus sign", "+1"},
		{"a leading zero", "01"},
		{"a count past the bound", "1000001"},
		{"a count past int32", "99999999999"},
		{"spaces", " 1"},
		{"a trailing space", "1 "},
		{"digit separators", "1_000"},
		{"a fraction", "1.0"},
		{"an exponent", "1e3"},
		{"hexadecimal", "0x10"},
		{"a word", "three"},
		{"a list", "1,2"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := ReadOngoingTransactions(tc.value)
			if err == nil || !strings.Contains(err.Error(), "not a decimal from 1 to 1000000") || got != 0 {
				t.Fatalf("ReadOngoingTransactions(%q) = %d, %v; want 0 and an error saying it is not a decimal from 1 to 1000000", tc.value, got, err)
			}
		})
	}
	if got, err := ReadOngoingTransactions(""); err != nil || got != 0 {
		t.Fatalf(`ReadOngoingTransactions("") = %d, %v; want no transaction`, got, err)
	}
}

func TestTheClustersOngoingTransactionsAreTheBrokersSummedAndBounded(t *testing.T) {
	if got := SumOngoingTransactions(3, 0, 4); got != 7 {
		t.Fatalf("SumOngoingTransactions(3, 0, 4) = %d, want 7", got)
	}
	if got := SumOngoingTransactions(MaxOngoingTransactionsPerBroker, MaxOngoingTransactionsPerBroker, 1); got != MaxOngoingTransactionsPerBroker {
		t.Fatalf("SumOngoingTransactions past the bound = %d, want it capped at %d", got, MaxOngoingTransactionsPerBroker)
	}
	if got := SumOngoingTransactions(math.MaxInt32, math.MaxInt32); got != MaxOngoingTransactionsPerBroker {
		t.Fatalf("SumOngoingTransactions past int32 = %d, want it capped at %d", got, MaxOngoingTransactionsPerBroker)
	}
	if got := SumOngoingTransactions(); got != 0 {
		t.Fatalf("SumOngoingTransactions() = %d, want 0", got)
	}
}
