package auth

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"fmt"
)

// AccessKey is an access key pair of the auth file.
type AccessKey struct {
	// ID is the access key id: AKIA and 16 upper-case letters and digits,
	// in the form of AWS's long-term keys.
	ID string `yaml:"id" json:"id"`
	// Secret is the secret access key: 40 characters of base64.
	Secret string `yaml:"secret" json:"secret"`
}

// NewKey returns a new access key pair drawn from crypto/rand: an id of 20
// characters (AKIA and 80 random bits in base32) and a secret of 40 (240
// random bits in base64).
func NewKey() (AccessKey, error) {
	var id [10]byte
	var secret [30]byte
	if _, err := rand.Read(id[:]); err != nil {
		return AccessKey{}, fmt.Errorf("auth: no random numbers: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return AccessKey{}, fmt.Errorf("auth: no random numbers: %w", err)
	}
	return AccessKey{ID: "AKIA" + base32.StdEncoding.EncodeToString(id[:]), Secret: base64.StdEncoding.EncodeToString(secret[:])}, nil
}
