package v1alpha1

import (
	"fmt"
	"strconv"
)

// What a broker says on its heartbeat Lease about the transactions its transaction
// coordinator holds open (docs/transactions.md, "In the KafkaCluster status"; docs/registry.md,
// "What a Lease may say"), and how the operator sums it into the KafkaCluster's status.

// AnnotationOngoingTransactions counts the transactions the broker's transaction coordinator
// holds open — Ongoing, PrepareCommit or PrepareAbort — as FormatOngoingTransactions writes
// it: a decimal, "3". Absent when it holds none.
const AnnotationOngoingTransactions = "kafka.paddock.dev/ongoing-transactions"

// MaxOngoingTransactionsPerBroker bounds the count a Lease may announce and, summed over the
// brokers, status.counts.ongoingTransactions: far more open transactions than a broker's
// coordinator can hold, so a larger number is not a broker's count but a mistake. A broker
// that holds more announces the bound.
const MaxOngoingTransactionsPerBroker = 1_000_000

// FormatOngoingTransactions is the AnnotationOngoingTransactions value for n open
// transactions: n in decimal, capped at MaxOngoingTransactionsPerBroker (so a broker never
// announces what the operator refuses), or "" when n is below 1 (the annotation is removed).
func FormatOngoingTransactions(n int32) string {
	if n < 1 {
		return ""
	}
	return strconv.Itoa(int(min(n, MaxOngoingTransactionsPerBroker)))
}

// ReadOngoingTransactions reads an AnnotationOngoingTransactions value strictly, as the
// operator must read what a broker says about itself: a count from 1 to
// MaxOngoingTransactionsPerBroker written without sign, spaces or leading zeros. Anything
// else is the error, and 0 is returned with it. "" is no transaction.
func ReadOngoingTransactions(s string) (int32, error) {
	if s == "" {
		return 0, nil
	}
	n, err := readDecimal(s)
	if err != nil || n < 1 || n > MaxOngoingTransactionsPerBroker {
		return 0, fmt.Errorf("%.20q is not a decimal from 1 to %d", s, MaxOngoingTransactionsPerBroker)
	}
	return n, nil
}

// SumOngoingTransactions adds up the brokers' counts, capped at
// MaxOngoingTransactionsPerBroker (a status field stays bounded whatever the brokers say).
func SumOngoingTransactions(perBroker ...int32) int32 {
	var total int64
	for _, n := range perBroker {
		total += int64(max(n, 0))
	}
	return int32(min(total, MaxOngoingTransactionsPerBroker))
}
