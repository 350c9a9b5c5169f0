// Package scram is the server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as
// Kafka speaks it, the salting the operator and the brokers share, and the PLAIN check
// (RFC 4616) against the same salted credentials (docs/security.md, "Authentication").
//
// It is pure: no I/O, no clock, no logging; randomness comes from the caller. It must never
// keep or return a password: a Credential holds only the salt, the iteration count and the two
// derived keys, and errors never quote what the client sent.
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"errors"
	"fmt"
	"hash"
)

// Mechanism is one SCRAM hash: SCRAM-SHA-256 or SCRAM-SHA-512.
type Mechanism struct {
	// Name is the SASL mechanism name, as SaslHandshake carries it.
	Name string
	// Code is the mechanism's number in the SCRAM admin APIs (1 SHA-256, 2 SHA-512).
	Code int8
	hash func() hash.Hash
}

// The mechanisms Kafka defines.
var (
	SHA256 = Mechanism{Name: "SCRAM-SHA-256", Code: 1, hash: sha256.New}
	SHA512 = Mechanism{Name: "SCRAM-SHA-512", Code: 2, hash: sha512.New}
)

// Mechanisms are both, in code order.
var Mechanisms = []Mechanism{SHA256, SHA512}

// MechanismNamed is the mechanism called name, or ok=false.
func MechanismNamed(name string) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if m.Name == name {
			return m, true
		}
	}
	return Mechanism{}, false
}

// MechanismOfCode is the mechanism with admin-API code c, or ok=false.
func MechanismOfCode(c int8) (Mechanism, bool) {
	for _, m := range Mechanisms {
		if m.Code == c {
			return m, true
		}
	}
	return Mechanism{}, false
}

// Iteration bounds Kafka accepts (ScramMechanism's minimum and maximum).
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// MinSaltBytes is the shortest salt Salt accepts.
const MinSaltBytes = 16

// Credential is what a server stores for one user and mechanism: never the password.
type Credential struct {
	Salt       []byte
	Iterations int
	StoredKey  []byte
	ServerKey  []byte
}

// ErrBadIterations: an iteration count outside MinIterations..MaxIterations.
var ErrBadIterations = fmt.Errorf("scram: iterations must be between %d and %d", MinIterations, MaxIterations)

// Salt derives the credential of password with salt and iterations (SaltedPassword =
// PBKDF2-HMAC(password, salt, iterations)).
func (m Mechanism) Salt(password string, salt []byte, iterations int) (Credential, error) {
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, ErrBadIterations
	}
	if len(salt) < MinSaltBytes {
		return Credential{}, fmt.Errorf("scram: salt of %d bytes, want at least %d", len(salt), MinSaltBytes)
	}
	salted, err := pbkdf2.Key(m.hash, password, salt, iterations, m.hash().Size())
	if err != nil {
		return Credential{}, fmt.Errorf("scram: %w", err)
	}
	return m.FromSalted(salted, salt, iterations)
}

// FromSalted is the credential of an already salted password (what AlterUserScramCredentials
// carries: the client salts).
func (m Mechanism) FromSalted(saltedPassword, salt []byte, iterations int) (Credential, error) {
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, ErrBadIterations
	}
	if len(saltedPassword) != m.hash().Size() || len(salt) == 0 {
		return Credential{}, errors.New("scram: salted password or salt of the wrong size")
	}
	clientKey := m.hmac(saltedPassword, []byte("Client Key"))
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  m.digest(clientKey),
		ServerKey:  m.hmac(saltedPassword, []byte("Server Key")),
	}, nil
}

// Verify reports whether password is the one cred was salted from: the check PLAIN makes
// against a stored SCRAM credential. It costs one PBKDF2 run.
func (m Mechanism) Verify(cred Credential, password string) bool {
	got, err := m.Salt(password, cred.Salt, cred.Iterations)
	if err != nil {
		// A stored salt shorter than Salt accepts (a credential a client salted through
		// AlterUserScramCredentials): derive without the length rule.
		salted, kerr := pbkdf2.Key(m.hash, password, cred.Salt, cred.Iterations, m.hash().Size())
		if kerr != nil {
			return false
		}
		if got, err = m.FromSalted(salted, cred.Salt, cred.Iterations); err != nil {
			return false
		}
	}
	return subtle.ConstantTimeCompare(got.StoredKey, cred.StoredKey) == 1
}

func (m Mechanism) hmac(key, msg []byte) []byte {
	h := hmac.New(m.hash, key)
	h.Write(msg)
	return h.Sum(nil)
}

func (m Mechanism) digest(b []byte) []byte {
	h := m.hash()
	h.Write(b)
	return h.Sum(nil)
}
