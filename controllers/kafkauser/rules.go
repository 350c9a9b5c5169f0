package kafkauser

import (
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
)

// passwordLength and passwordAlphabet make a generated password: 32 letters and digits,
// about 190 bits, safe in a JAAS line and a shell without quoting.
const (
	passwordLength   = 32
	passwordAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// saltBytes is the length of a generated salt.
const saltBytes = 16

// generatePassword is a new random password drawn uniformly from passwordAlphabet.
func generatePassword(random io.Reader) (string, error) {
	var b strings.Builder
	n := big.NewInt(int64(len(passwordAlphabet)))
	for range passwordLength {
		i, err := randIndex(random, n)
		if err != nil {
			return "", fmt.Errorf("generate a password: %w", err)
		}
		b.WriteByte(passwordAlphabet[i])
	}
	return b.String(), nil
}

// randIndex is a uniform number below n from random (rejection sampling over one byte, n ≤ 256).
func randIndex(random io.Reader, n *big.Int) (int, error) {
	limit := 256 - 256%int(n.Int64())
	var one [1]byte
	for {
		if _, err := io.ReadFull(random, one[:]); err != nil {
			return 0, err
		}
		if int(one[0]) < limit {
			return int(one[0]) % int(n.Int64()), nil
		}
	}
}

// jaasConfig is the sasl.jaas.config line a Java client configures for user.
func jaasConfig(user, password string) string {
	return fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username=%q password=%q;`, user, password)
}

// saltCredentials are the stored SCRAM-SHA-256 and SCRAM-SHA-512 credentials of password,
// each with its own random salt, at scram.MinIterations.
func saltCredentials(password string, random io.Reader) (scram.Stored, error) {
	stored := scram.Stored{}
	for _, m := range scram.Mechanisms {
		salt := make([]byte, saltBytes)
		if _, err := io.ReadFull(random, salt); err != nil {
			return nil, fmt.Errorf("salt: %w", err)
		}
		cred, err := m.Salt(password, salt, scram.MinIterations)
		if err != nil {
			return nil, err
		}
		stored[m.Name] = cred
	}
	return stored, nil
}

// credentialsMatch reports whether text is a stored entry of password for both mechanisms:
// then nothing is re-salted (a re-salt would change the Secret on every reconcile).
func credentialsMatch(text []byte, password string) bool {
	if len(text) == 0 {
		return false
	}
	stored, err := scram.Decode(text)
	if err != nil {
		return false
	}
	for _, m := range scram.Mechanisms {
		cred, ok := stored[m.Name]
		if !ok || cred.Iterations < scram.MinIterations || !m.Verify(cred, password) {
			return false
		}
	}
	return true
}

// reservedSecretName says why Secret name may not be a KafkaUser's own: it is one the
// cluster's security needs (its CAs, trust bundles, broker certificates, the credentials),
// which the operator writes for the cluster. "" when it is free.
func reservedSecretName(cluster, name string) string {
	reserved := []string{
		kafkav1alpha1.ClusterCASecretName(cluster), kafkav1alpha1.ClusterCACertSecretName(cluster),
		kafkav1alpha1.ClientsCASecretName(cluster), kafkav1alpha1.ClientsCACertSecretName(cluster),
		kafkav1alpha1.ScramCredentialsSecretName(cluster),
	}
	for _, r := range reserved {
		if name == r {
			return fmt.Sprintf("Secret %s is the cluster's own (docs/security.md, \"Secrets and who reads them\"); give the KafkaUser another name", name)
		}
	}
	// Broker certificates: every id, not just those below replicas, so scaling up never
	// collides with a user.
	if mid, ok := strings.CutPrefix(name, cluster+"-broker-"); ok {
		if digits, ok := strings.CutSuffix(mid, "-cert"); ok {
			if id, err := strconv.ParseInt(digits, 10, 32); err == nil && kafkav1alpha1.BrokerCertSecretName(cluster, int32(id)) == name {
				return fmt.Sprintf("Secret %s holds broker %d's certificate; give the KafkaUser another name", name, id)
			}
		}
	}
	return ""
}

// userLeaf is a tls user's client certificate: CN=<user>, the principal User:CN=<user>
// (Apache's default mapping of a certificate subject, Strimzi's naming).
func userLeaf(user string) pki.Leaf {
	return pki.Leaf{Subject: pkix.Name{CommonName: user}, Client: true}
}
