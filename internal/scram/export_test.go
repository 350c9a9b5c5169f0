package scram

import "crypto/pbkdf2"

func pbkdf2Key(m Mechanism, pw string, salt []byte, it int) []byte {
	k, err := pbkdf2.Key(m.hash, pw, salt, it, m.hash().Size())
	if err != nil {
		panic(err)
	}
	return k
}
