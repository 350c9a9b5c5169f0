package scram

import (
	"bytes"
	"crypto/rand"
	"testing"
)

// FuzzServerExchange feeds arbitrary client messages to both steps of an exchange: it must
// never panic, never report done without the right proof, and never echo input in an error.
func FuzzServerExchange(f *testing.F) {
	f.Add([]byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add([]byte("y,a=alice,n=alice,r=x"), []byte("c=eSxhPWFsaWNlLA==,r=x,p="))
	f.Add([]byte("n,,n=a=2C,r=q,ext"), []byte(""))
	cred, err := SHA256.Salt("pw", bytes.Repeat([]byte{1}, 16), 4096)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := NewServer(SHA256, func(string) (Credential, bool) { return cred, true }, rand.Reader)
		if _, _, err := s.Step(first); err != nil {
			if len(first) > 3 && bytes.Contains([]byte(err.Error()), first) {
				t.Fatalf("error quotes the input: %v", err)
			}
			return
		}
		if _, done, err := s.Step(final); done && err == nil {
			t.Fatalf("authenticated without the password: %q %q", first, final)
		}
	})
}

// FuzzParsePlain: never panics; an accepted message always has a user and a password.
func FuzzParsePlain(f *testing.F) {
	f.Add([]byte("\x00alice\x00pw"))
	f.Add([]byte("a\x00a\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		u, p, err := ParsePlain(msg)
		if err == nil && (u == "" || p == "") {
			t.Fatalf("accepted %q", msg)
		}
	})
}
