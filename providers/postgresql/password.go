package postgresql

import (
	"crypto/rand"
	"fmt"
)

// passwordLen is the length of a generated password: 32 characters of a
// 62-letter alphabet, about 190 bits.
const passwordLen = 32

const passwordAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newPassword returns a random password of letters and digits only, so its
// SQL literal needs no escaping (checked again by passwordLiteral).
func newPassword() (string, error) {
	b := make([]byte, passwordLen)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating a password: %w", err)
	}
	// 256 % 62 != 0: reject the bytes that would bias the choice.
	out := make([]byte, 0, passwordLen)
	for len(out) < passwordLen {
		for _, c := range b {
			if int(c) < 248 && len(out) < passwordLen { // 248 = 4*62
				out = append(out, passwordAlphabet[int(c)%len(passwordAlphabet)])
			}
		}
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("generating a password: %w", err)
		}
	}
	return string(out), nil
}

// passwordLiteral is the SQL literal of a generated password.
func passwordLiteral(pw string) (string, error) {
	for _, r := range pw {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return "", fmt.Errorf("generated password has a character outside [A-Za-z0-9]")
		}
	}
	return "'" + pw + "'", nil
}
