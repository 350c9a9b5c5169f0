package kafkauser

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"
)

func TestAGeneratedPasswordIsLongAndOfLettersAndDigitsOnly(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		p, err := generatePassword(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != passwordLength {
			t.Fatalf("password %q: %d characters, want %d", p, len(p), passwordLength)
		}
		for _, c := range p {
			if !strings.ContainsRune(passwordAlphabet, c) {
				t.Fatalf("password %q holds %q, outside the alphabet", p, c)
			}
		}
		if seen[p] {
			t.Fatalf("password %q generated twice", p)
		}
		seen[p] = true
	}
}

func TestAPasswordNeedsEnoughRandomness(t *testing.T) {
	if _, err := generatePassword(bytes.NewReader(make([]byte, 5))); err == nil {
		t.Fatal("a password from 5 random bytes, want an error")
	}
}

func TestStoredCredentialsMatchOnlyTheirPasswordInBothMechanisms(t *testing.T) {
	stored, err := saltCredentials("right", rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	text := stored.Encode()
	if !credentialsMatch(text, "right") {
		t.Error("the credentials of a password do not match it")
	}
	if credentialsMatch(text, "wrong") {
		t.Error("the credentials of a password match another")
	}
	one := bytes.SplitN(text, []byte("\n"), 2)[0]
	if credentialsMatch(one, "right") {
		t.Error("an entry of one mechanism matches: the other would never be written")
	}
	for _, bad := range [][]byte{nil, []byte("garbage")} {
		if credentialsMatch(bad, "right") {
			t.Errorf("entry %q matches", bad)
		}
	}
}

func TestTheClusterSecretsAreNoUsersSecrets(t *testing.T) {
	for _, name := range []string{"c-cluster-ca", "c-cluster-ca-cert", "c-clients-ca", "c-clients-ca-cert", "c-scram-credentials", "c-broker-0-cert", "c-broker-17-cert"} {
		if reservedSecretName("c", name) == "" {
			t.Errorf("%s is free for a KafkaUser, want reserved", name)
		}
	}
	for _, name := range []string{"alice", "c-broker-x-cert", "c-broker-0", "d-cluster-ca", "c-broker-007-cert"} {
		if why := reservedSecretName("c", name); why != "" {
			t.Errorf("%s is reserved (%s), want free", name, why)
		}
	}
}

func TestTheJAASLineQuotesTheUserAndPassword(t *testing.T) {
	got := jaasConfig("alice", "pw")
	want := `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="pw";`
	if got != want {
		t.Errorf("jaasConfig = %q, want %q", got, want)
	}
}
